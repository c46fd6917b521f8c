"""The base of every local server: a :class:`~memstream.runtime.servers.process.ChildProcess` bound
to
127.0.0.1 that ``start()`` waits for until it answers a real protocol request."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

from memstream.runtime.servers.process import ChildExited, ChildNotReady, ChildProcess

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


def free_ports(count: int) -> list[int]:
    """`count` distinct ports that were free a moment ago."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def port_open(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def run_coroutine_blocking(factory: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
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


class LoopbackServer:
    """A child process listening on 127.0.0.1:``port`` with its output in a log file.

    Subclasses provide :meth:`_command` and :meth:`_is_ready`, and may override
    :meth:`_prepare` (runs before each start), :meth:`_env`, :meth:`_preexec_fn` and the class
    attributes.

    ``workdir`` holds the log file (``<name>.log``) and any state; when it is ``None`` a temporary
    folder is created and removed again by :meth:`cleanup` / leaving the ``with`` block. ``stop()``
    alone keeps it, so a stopped server can be started again on the same data.
    ``start()`` blocks until the server answers (bounded by ``startup_timeout``); ``stop()`` sends
    SIGTERM and waits, then SIGKILL; ``kill()`` sends SIGKILL at once (crash tests). The blocking
    calls have ``astart()``/``astop()`` twins for use from a running event loop.
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
        #: Seconds the last successful ``start()`` took (process spawn to ready).
        self.startup_seconds: float | None = None
        self._child = ChildProcess(
            self.name, self.workdir / f"{self.name}.log", stop_timeout=self.stop_timeout
        )
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
        """Runs in the child just before ``exec`` (after the die-with-parent hook)."""
        return None

    # -- public API ---------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self._child.log_path

    @log_path.setter
    def log_path(self, path: Path) -> None:
        self._child.log_path = Path(path)

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._child.pid

    @property
    def running(self) -> bool:
        return self._child.running

    @property
    def returncode(self) -> int | None:
        """The exit status once the process exited (negative: the signal that ended it)."""
        return self._child.returncode

    def spawn(self) -> None:
        """Start the process on `port` without waiting for it to answer: whoever restarts it
        (``memstream.runtime.supervisor``) polls :meth:`is_ready`. Raises :class:`ServerStartError`
        when the port is taken."""
        with self._lock:
            if self.running:
                return
            if port_open(self.port, timeout=0.2):
                # Otherwise the readiness probe would talk to whatever already listens there.
                raise ServerStartError(f"{self.name}: port {self.address} is already in use")
            self._prepare()
            command = self._command()
            log.info("starting %s on %s (log: %s)", self.name, self.address, self.log_path)
            self._child.stop_timeout = self.stop_timeout
            self._child.start(
                command, cwd=self.workdir, env=self._env(), preexec_fn=self._preexec_fn()
            )

    def is_ready(self) -> bool:
        """The process runs and answers a real protocol request."""
        return self.running and self._is_ready()

    def start(self) -> Self:
        """Start the process and block until it is ready. Raises :class:`ServerStartError`."""
        with self._lock:
            if self.running:
                return self
            self.spawn()
            try:
                self.startup_seconds = self._child.wait_ready(
                    self._is_ready, timeout=self.startup_timeout, poll_interval=self.poll_interval
                )
            except (ChildExited, ChildNotReady) as exc:
                self.kill()
                raise ServerStartError(f"{exc} (on {self.address})") from None
            except BaseException:
                self.kill()
                raise
            log.info("%s ready on %s in %.2f s", self.name, self.address, self.startup_seconds)
            return self

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM, wait up to ``timeout`` (default ``stop_timeout``) for exit, then SIGKILL."""
        with self._lock:
            self._child.stop(self.stop_timeout if timeout is None else timeout)

    def kill(self) -> None:
        """SIGKILL the process (no clean shutdown) and reap it."""
        with self._lock:
            self._child.kill()

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
        return self._child.log_tail(lines)

    def output(self) -> bytes:
        """What the current run wrote to the log so far."""
        return self._child.output()

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
        return run_coroutine_blocking(lambda: _kafka_metadata_async(bootstrap_servers, timeout))
    except Exception as exc:
        log.debug("kafka metadata probe on %s failed: %r", bootstrap_servers, exc)
        return False


class KafkaProtocolServer(LoopbackServer):
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
        return port_open(self.port) and kafka_metadata_ok(self.bootstrap_servers, timeout=3.0)
