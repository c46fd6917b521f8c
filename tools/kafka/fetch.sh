#!/usr/bin/env bash
# Download Apache Kafka 4.1.1 (kafka_2.13) and its runtime dependencies from Maven Central
# into tools/kafka/libs/. Idempotent: does nothing when the broker jar is already there.
# Needs Java 17+ (to run the broker) and Maven 3.8+ (to fetch it).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
libs="${here}/libs"

if compgen -G "${libs}/kafka_2.13-*.jar" > /dev/null; then
    echo "kafka jars already present in ${libs}"
    exit 0
fi

command -v mvn > /dev/null || { echo "fetch.sh: mvn (Maven) is required" >&2; exit 1; }

tmp="${here}/target/libs.partial"   # target/ is git-ignored
rm -rf "${tmp}"
mkdir -p "${here}/target"
mvn -q -B -Dstyle.color=never -f "${here}/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="${tmp}"
rm -rf "${libs}"
mv "${tmp}" "${libs}"
rmdir "${here}/target" 2>/dev/null || true
echo "kafka jars copied to ${libs} ($(ls "${libs}" | wc -l) files)"
