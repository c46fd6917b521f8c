#!/usr/bin/env bash
# Set up a virtualenv and run every check and test: lint, types, unit tests, and the integration
# suite on both Kafka-protocol brokers (Tansu and Apache Kafka) with SecantusDB.
# Extra arguments go to pytest (e.g. `scripts/test.sh -k window`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
bash scripts/install-local-llm.sh  # portable build of the local LLM runtime
.venv/bin/python -m pip install --quiet -e '.[embedded,local,local-small,dev]'
bash tools/kafka/fetch.sh

.venv/bin/ruff check .
.venv/bin/ruff format --check events handlers streams projections memstream
.venv/bin/mypy
.venv/bin/mypy --config-file tests/mypy.ini tests  # the tests still call what exists
.venv/bin/lint-imports  # the layering of docs/architecture.md, "Layout"
# Three test processes (each with its own brokers and database server), tests handed out as they
# finish. Three on two cores: the integration tests mostly wait (on stub LLMs, brokers,
# timeouts), so a third process fills the cores while the others wait.
# `MEMSTREAM_TEST_PROCESSES=0` runs them in this one.
exec .venv/bin/python -m pytest --brokers tansu,apache \
  -n "${MEMSTREAM_TEST_PROCESSES:-3}" --dist worksteal "$@"
