"""The runtime: infrastructure (embedded or given) plus one worker process per pipeline stage.

With `KAFKA_BOOTSTRAP_SERVERS` / `MONGODB_URI` unset, an embedded Apache Kafka broker (data under
`data_dir/kafka`; Tansu in memory with `ephemeral`) and an embedded SecantusDB server (data under
`data_dir/mongo`) are started on loopback. The stage
workers are child processes of `python -m memstream worker --stage …`, each its own consumer
group, told where everything is through their environment. `memstream.runtime.supervisor` restarts
the
ones that crash.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from memstream.config import Settings
from memstream.runtime.servers import (
    ApacheKafkaBroker,
    LoopbackServer,
    SecantusServer,
    TansuBroker,
    default_kafka_libs_dir,
    fetch_kafka_jars,
    kafka_jars_size,
    missing_jars,
    require_java,
)
from memstream.runtime.servers.kafka_lock import KAFKA_VERSION
from memstream.runtime.servers.process import ChildProcess
from memstream.runtime.topics import ensure_topics, topic_partitions
from memstream.runtime.worker import EXIT_WITH_PARENT_VARIABLE, METRICS_MARKER, READY_MARKER

log = logging.getLogger(__name__)

TANSU_ENVIRONMENT = {
    "MEMSTREAM_PRODUCER_MAX_BATCH_SIZE": "1",
    "MEMSTREAM_SESSION_TIMEOUT": "3",
    "MEMSTREAM_HEARTBEAT_INTERVAL": "0.5",
}
"""What stage workers need on Tansu: exact end offsets for table recovery, quick group joins."""

KAFKA_ENVIRONMENT = {"MEMSTREAM_SESSION_TIMEOUT": "6", "MEMSTREAM_HEARTBEAT_INTERVAL": "1"}
"""Stage workers on Apache Kafka: a restarted worker's group rejoins within seconds (6 s is the
broker's default minimum session timeout)."""

DURABLE_KAFKA_PROPERTIES = {
    # The log is the source of truth (replay rebuilds every read model from it): keep it.
    "log.retention.ms": "-1",
    # A group's committed offsets outlive an `up` stopped for months (default: 7 days).
    "offsets.retention.minutes": str(60 * 24 * 365 * 10),
}
"""The embedded durable broker's settings on top of ApacheKafkaBroker's defaults."""


@dataclass
class Infrastructure:
    """Where the broker and the database are, and the embedded servers we started for them."""

    bootstrap_servers: str
    mongodb_uri: str
    servers: list[LoopbackServer] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    log: str = "external"
    """The log in use: `kafka` (durable, embedded), `tansu` (ephemeral, embedded), `external`."""
    log_path: Path | None = None
    """Where the embedded durable log keeps its data."""
    database_path: Path | None = None
    """Where the embedded database keeps its data (a throwaway folder with `ephemeral`)."""
    llm_server: LoopbackServer | None = None
    """The local LLM server `running_pipeline` started (no LLM endpoint configured)."""

    def supervised_servers(self) -> dict[str, LoopbackServer]:
        """The servers `memstream.runtime.supervisor.Supervisor` restarts when they die: the local
        LLM.
        (A dead broker or database is waited out by the stages, and restarting them is not
        ours to do on a configured deployment.)"""
        return {} if self.llm_server is None else {"local-llm": self.llm_server}

    def describe_log(self) -> str:
        if self.log == "kafka":
            return f"durable Apache Kafka at {self.log_path}"
        if self.log == "tansu":
            return "ephemeral Tansu (in memory: lost when memstream up stops)"
        return f"external broker at {self.bootstrap_servers}"


@contextmanager
def infrastructure(
    settings: Settings, *, ephemeral: bool = False, mongo_path: Path | None = None
) -> Iterator[Infrastructure]:
    """Use the configured broker/database, starting embedded ones for what is not configured.

    The embedded log is Apache Kafka in KRaft mode with its data under `data_dir/kafka`; with
    `ephemeral`, Tansu in memory, and the embedded database in a folder removed on exit (unless
    `mongo_path` says where), so the log and the read model never disagree after a restart.
    Stopped in reverse: the broker before the database (see docs/architecture.md, "Operations").
    """
    with ExitStack() as stack:
        servers: list[LoopbackServer] = []
        environment: dict[str, str] = {}
        uri = settings.mongodb.uri
        database_path = None
        if not uri:
            if mongo_path is None and ephemeral:
                scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="memstream-"))
                mongo_path = Path(scratch) / "mongo"
            database_path = mongo_path or settings.data_dir / "mongo"
            print("starting the embedded database (SecantusDB) …", file=sys.stderr, flush=True)
            database_path.parent.mkdir(parents=True, exist_ok=True)
            database = stack.enter_context(SecantusServer(database_path))
            servers.append(database)
            uri = database.uri
            if settings.memory.master_key_file is None:
                environment["MEMSTREAM_MASTER_KEY_FILE"] = str(ensure_master_key(settings))
        bootstrap = settings.kafka.bootstrap_servers
        log_kind, log_path = "external", None
        if not bootstrap:
            broker: TansuBroker | ApacheKafkaBroker
            if ephemeral:
                print(
                    "starting the ephemeral log (Tansu, in memory) …", file=sys.stderr, flush=True
                )
                broker = stack.enter_context(TansuBroker(settings.data_dir / "tansu"))
                environment.update(TANSU_ENVIRONMENT)
                log_kind = "tansu"
            else:
                broker = stack.enter_context(durable_broker(settings.data_dir / "kafka"))
                environment.update(KAFKA_ENVIRONMENT)
                log_kind, log_path = "kafka", broker.data_dir
            servers.append(broker)
            bootstrap = broker.bootstrap_servers
        environment.update({"KAFKA_BOOTSTRAP_SERVERS": bootstrap, "MONGODB_URI": uri})
        yield Infrastructure(
            bootstrap, uri, servers, environment, log_kind, log_path, database_path
        )


def ensure_master_key(settings: Settings) -> Path:
    """The embedded database's master key file (`data_dir/master.key`), made on first use: the
    data keys in the database are wrapped with it (`memstream.keystore.wrapping`), so a copy of
    the database alone opens nothing. Kept beside, never inside, the database's folder; back
    it up apart from it."""
    from memstream.keystore.sealing import MASTER_KEY_FILE
    from memstream.keystore.wrapping import new_master_key, write_master_keys

    path = (settings.data_dir / MASTER_KEY_FILE).resolve()
    if not path.exists():
        write_master_keys(path, [new_master_key()])
        print(f"created the master key that wraps the data keys: {path}", file=sys.stderr)
    return path


def durable_broker(workdir: Path) -> ApacheKafkaBroker:
    """The embedded durable log: Apache Kafka with its jars (fetched once) and a Java 17+."""
    libs = default_kafka_libs_dir()
    missing = missing_jars(libs)
    if missing:
        size = kafka_jars_size(missing) / 1e6
        print(
            f"fetching Apache Kafka {KAFKA_VERSION} ({len(missing)} jars, {size:.0f} MB) from "
            f"Maven Central into {libs} (once) …",
            file=sys.stderr,
            flush=True,
        )
        started = time.monotonic()
        fetch_kafka_jars(libs)
        print(f"  fetched in {time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
    java = require_java()
    print(
        f"starting the durable log (Apache Kafka {KAFKA_VERSION} on Java {java.major} from "
        f"{java.source}), data in {workdir / 'data'} …",
        file=sys.stderr,
        flush=True,
    )
    return ApacheKafkaBroker(
        workdir, libs_dir=libs, java=java.java, properties=DURABLE_KAFKA_PROPERTIES
    )


def configured(settings: Settings, environment: Mapping[str, str]) -> Settings:
    """`settings` with the runtime's environment (broker, database, LLM …) applied."""
    from memstream.config import load_settings

    return load_settings(environ={**os.environ, **environment}) if environment else settings


def prepare_topics(settings: Settings) -> dict[str, int]:
    """Create the pipeline's topics (explicit partition counts) before any worker starts."""
    return asyncio.run(ensure_topics(settings.kafka))


class StageProcess:
    """One stage worker as a child process, with its output in a log file.

    A :class:`~memstream.runtime.servers.process.ChildProcess` in `up`'s own session (a terminal's
    Ctrl-C
    reaches the workers too) that dies with `up` on Linux.
    """

    def __init__(
        self,
        stage: str,
        environment: Mapping[str, str],
        log_dir: Path,
        command: Sequence[str] | None = None,
        *,
        log_name: str | None = None,
    ) -> None:
        """`log_name` (default `worker-<stage>.log`) tells a second worker of a stage apart."""
        self.stage = stage
        self.environment = {**environment, EXIT_WITH_PARENT_VARIABLE: "1"}
        self.command = (
            list(command)
            if command is not None
            else [sys.executable, "-m", "memstream", "worker", "--stage", stage]
        )
        log_dir.mkdir(parents=True, exist_ok=True)
        self._child = ChildProcess(
            f"worker {stage}",
            log_dir / (log_name or f"worker-{stage.replace(':', '-')}.log"),
            stop_timeout=15.0,
            new_session=False,
        )

    @property
    def log_path(self) -> Path:
        return self._child.log_path

    def start(self) -> StageProcess:
        self._child.start(self.command, env={**os.environ, **self.environment})
        return self

    @property
    def pid(self) -> int | None:
        return self._child.pid

    @property
    def running(self) -> bool:
        return self._child.running

    @property
    def returncode(self) -> int | None:
        """The exit status once the worker exited (negative: the signal that ended it)."""
        return self._child.returncode

    def is_ready(self) -> bool:
        """The worker printed its ready marker (first partition assignment done)."""
        return f"{READY_MARKER} {self.stage}".encode() in self._child.output()

    def metrics_address(self) -> str | None:
        """Where this run of the worker serves its metrics and probes (its marker line)."""
        marker = f"{METRICS_MARKER} {self.stage} ".encode()
        lines = [line for line in self._child.output().splitlines() if line.startswith(marker)]
        return lines[-1][len(marker) :].decode().strip() if lines else None

    def log_tail(self, lines: int = 30) -> str:
        return self._child.log_tail(lines)

    def terminate(self) -> None:
        """Ask the worker to shut down (SIGTERM) without waiting."""
        self._child.terminate()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, wait for a clean shutdown, SIGKILL after `timeout` seconds."""
        self._child.stop(timeout)

    def kill(self) -> None:
        """SIGKILL: the crash a worker must survive without losing or duplicating anything."""
        self._child.kill()


class StageFailed(RuntimeError):
    """A stage worker exited or did not become ready; the message has its log tail."""


class Pipeline:
    """All stage workers of a configuration, started together and stopped together."""

    def __init__(
        self,
        stages: list[str],
        environment: Mapping[str, str],
        log_dir: Path,
        commands: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """`commands` replaces a stage's `memstream worker` command (tests run stand-ins)."""
        commands = commands or {}
        self.processes = {
            stage: StageProcess(stage, environment, log_dir, commands.get(stage))
            for stage in stages
        }

    def __enter__(self) -> Pipeline:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self, timeout: float = 120.0) -> Pipeline:
        for process in self.processes.values():
            process.start()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 120.0, stages: list[str] | None = None) -> None:
        deadline = time.monotonic() + timeout
        waiting = [self.processes[stage] for stage in (stages or list(self.processes))]
        while waiting:
            for process in list(waiting):
                if process.is_ready():
                    waiting.remove(process)
                elif not process.running:
                    raise StageFailed(f"worker {process.stage} exited:\n{process.log_tail()}")
            if time.monotonic() > deadline:
                names = ", ".join(process.stage for process in waiting)
                raise StageFailed(
                    f"workers not ready after {timeout:.0f}s: {names}\n"
                    + "\n".join(process.log_tail(15) for process in waiting)
                )
            time.sleep(0.1)

    def metrics_addresses(self) -> dict[str, str]:
        """Each running worker's metrics and probes address."""
        found = {stage: process.metrics_address() for stage, process in self.processes.items()}
        return {stage: address for stage, address in found.items() if address}

    def restart(self, stage: str, *, kill: bool = False, timeout: float = 120.0) -> None:
        process = self.processes[stage]
        process.kill() if kill else process.stop()
        process.start()
        self.wait_ready(timeout, [stage])

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM every worker at once, so they shut down in parallel; SIGKILL those still
        running `timeout` seconds later. One deadline for all: waiting `timeout` for each in
        turn would let N slow workers hold `up`'s exit for N times as long."""
        for process in self.processes.values():
            process.terminate()
        deadline = time.monotonic() + timeout
        for process in self.processes.values():
            process.stop(max(0.0, deadline - time.monotonic()))


def pipeline_stages(settings: Settings) -> list[str]:
    """The stages to run: the window, one stage per memory type, the projector.

    Every memory type has its stage, enabled or not — the built-in ones and the declared custom
    ones: a type that is not extracted automatically still reconciles the memories the
    application saves directly.
    """
    return ["window", *(f"extract:{kind}" for kind in settings.memory.types), "projector"]


@contextmanager
def running_pipeline(
    settings: Settings, *, log_dir: Path, ephemeral: bool = False, mongo_path: Path | None = None
) -> Iterator[tuple[Settings, Infrastructure, Pipeline]]:
    """Infrastructure, the LLM (local if none is configured), topics and every stage worker.

    Nothing watches the workers here: run `memstream.runtime.supervisor.Supervisor(pipeline,
    servers=infra.supervised_servers())` in the foreground (as `memstream up` does) to restart a
    crashed stage or local LLM server and to stop on a crash loop.
    """
    from memstream.promotion.lineage import ShadowRefused
    from memstream.runtime.llm_choice import local_llm
    from memstream.runtime.served import served_lineage_settings

    with infrastructure(settings, ephemeral=ephemeral, mongo_path=mongo_path) as infra:
        # the served lineage's extractor may run another local model (docs/architecture.md,
        # "Promotion")
        try:
            served = served_lineage_settings(configured(settings, infra.environment))
        except ShadowRefused as exc:
            raise StageFailed(f"the served shadow cannot run: {exc}") from None
        with local_llm(served, log_dir) as llm:
            infra.llm_server = llm.server
            environment = {**infra.environment, **llm.environment}
            yield from _started(settings, environment, log_dir, infra)


def _started(
    settings: Settings, environment: dict[str, str], log_dir: Path, infra: Infrastructure
) -> Iterator[tuple[Settings, Infrastructure, Pipeline]]:
    """The topics and every stage worker, with the infrastructure's and the LLM's environment."""
    if settings.operations.metrics_port is None:
        environment["MEMSTREAM_METRICS_PORT"] = "0"  # each worker a free port of its own
    settings = configured(settings, environment)
    partitions = topic_partitions(settings.kafka, prepare_topics(settings))
    if partitions != settings.kafka.partitions:  # topics made before, with another count
        environment["MEMSTREAM_PARTITIONS"] = str(partitions)
        settings = configured(settings, environment)
    stages = pipeline_stages(settings)
    print(f"starting {', '.join(stages)} …", file=sys.stderr, flush=True)
    with Pipeline(stages, environment, log_dir) as pipeline:
        yield settings, infra, pipeline
