"""The runtime: infrastructure (embedded or given) plus one worker process per pipeline stage.

With `KAFKA_BOOTSTRAP_SERVERS` / `MONGODB_URI` unset, an embedded Tansu broker (memory storage)
and an embedded SecantusDB server (data under `data_dir/mongo`) are started on loopback. The stage
workers are child processes of `python -m memstream worker --stage …`, each its own consumer
group, told where everything is through their environment. `memstream.supervisor` restarts the
ones that crash.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from events.memories import MEMORY_TYPES
from memstream.config import Settings
from memstream.servers import LoopbackServer, SecantusServer, TansuBroker
from memstream.topics import ensure_topics
from memstream.worker import READY_MARKER

log = logging.getLogger(__name__)

TANSU_ENVIRONMENT = {
    "MEMSTREAM_PRODUCER_MAX_BATCH_SIZE": "1",
    "MEMSTREAM_SESSION_TIMEOUT": "3",
    "MEMSTREAM_HEARTBEAT_INTERVAL": "0.5",
}
"""What stage workers need on Tansu: exact end offsets for table recovery, quick group joins."""


@dataclass
class Infrastructure:
    """Where the broker and the database are, and the embedded servers we started for them."""

    bootstrap_servers: str
    mongodb_uri: str
    servers: list[LoopbackServer] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)


@contextmanager
def infrastructure(
    settings: Settings, *, mongo_path: Path | None = None
) -> Iterator[Infrastructure]:
    """Use the configured broker/database, starting embedded ones for what is not configured."""
    with ExitStack() as stack:
        servers: list[LoopbackServer] = []
        environment: dict[str, str] = {}
        bootstrap = settings.kafka.bootstrap_servers
        if not bootstrap:
            log.info("starting the embedded Kafka-protocol broker (tansu)")
            broker = stack.enter_context(TansuBroker(settings.data_dir / "tansu"))
            servers.append(broker)
            bootstrap = broker.bootstrap_servers
            environment.update(TANSU_ENVIRONMENT)
        uri = settings.mongodb.uri
        if not uri:
            log.info("starting the embedded MongoDB-protocol server (SecantusDB)")
            path = mongo_path or settings.data_dir / "mongo"
            path.parent.mkdir(parents=True, exist_ok=True)
            database = stack.enter_context(SecantusServer(path))
            servers.append(database)
            uri = database.uri
        environment.update({"KAFKA_BOOTSTRAP_SERVERS": bootstrap, "MONGODB_URI": uri})
        yield Infrastructure(bootstrap, uri, servers, environment)


def configured(settings: Settings, environment: Mapping[str, str]) -> Settings:
    """`settings` with the runtime's environment (broker, database, LLM …) applied."""
    from memstream.config import load_settings

    return load_settings(environ={**os.environ, **environment}) if environment else settings


def prepare_topics(settings: Settings) -> dict[str, int]:
    """Create the pipeline's topics (explicit partition counts) before any worker starts."""
    return asyncio.run(ensure_topics(settings.kafka))


class StageProcess:
    """One stage worker as a child process, with its output in a log file."""

    def __init__(
        self,
        stage: str,
        environment: Mapping[str, str],
        log_dir: Path,
        command: Sequence[str] | None = None,
    ) -> None:
        self.stage = stage
        self.environment = dict(environment)
        self.command = (
            list(command)
            if command is not None
            else [sys.executable, "-m", "memstream", "worker", "--stage", stage]
        )
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"worker-{stage.replace(':', '-')}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    def start(self) -> StageProcess:
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as output:
            self._proc = subprocess.Popen(
                self.command,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.environment},
            )
        return self

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit status once the worker exited (negative: the signal that ended it)."""
        return self._proc.poll() if self._proc is not None else None

    def is_ready(self) -> bool:
        """The worker printed its ready marker (first partition assignment done)."""
        with self.log_path.open("rb") as output:
            output.seek(self._log_offset)
            return f"{READY_MARKER} {self.stage}".encode() in output.read()

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def terminate(self) -> None:
        """Ask the worker to shut down (SIGTERM) without waiting."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, wait for a clean shutdown, SIGKILL after `timeout` seconds."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("worker %s did not stop in %.0fs; killing it", self.stage, timeout)
            self.kill()

    def kill(self) -> None:
        """SIGKILL: the crash a worker must survive without losing or duplicating anything."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


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

    def restart(self, stage: str, *, kill: bool = False, timeout: float = 120.0) -> None:
        process = self.processes[stage]
        process.kill() if kill else process.stop()
        process.start()
        self.wait_ready(timeout, [stage])

    def stop(self) -> None:
        for process in self.processes.values():
            process.terminate()  # all at once, so they shut down in parallel
        for process in self.processes.values():
            process.stop()


def pipeline_stages(settings: Settings) -> list[str]:
    """The stages to run: the window, one stage per memory type, the projector.

    Every memory type has its stage, enabled or not: a type that is not extracted
    automatically still reconciles the memories the application saves directly.
    """
    return ["window", *(f"extract:{kind}" for kind in MEMORY_TYPES), "projector"]


@contextmanager
def running_pipeline(
    settings: Settings, *, log_dir: Path, mongo_path: Path | None = None
) -> Iterator[tuple[Settings, Infrastructure, Pipeline]]:
    """Infrastructure, the LLM (local if none is configured), topics and every stage worker.

    Nothing watches the workers here: run `memstream.supervisor.Supervisor(pipeline)` in the
    foreground (as `memstream up` does) to restart a crashed stage and to stop on a crash loop.
    """
    from memstream.local_llm import local_llm_environment

    with (
        local_llm_environment(settings, log_dir) as llm_environment,
        infrastructure(settings, mongo_path=mongo_path) as infra,
    ):
        environment = {**infra.environment, **llm_environment}
        settings = configured(settings, environment)
        prepare_topics(settings)
        stages = pipeline_stages(settings)
        print(f"starting {', '.join(stages)} …", file=sys.stderr, flush=True)
        with Pipeline(stages, environment, log_dir) as pipeline:
            yield settings, infra, pipeline
