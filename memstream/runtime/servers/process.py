"""One child process with its output in a log file: the start/stop/kill/readiness logic shared by
the servers (:class:`memstream.runtime.servers.LoopbackServer`) and the stage workers
(:class:`memstream.runtime.pipeline.StageProcess`). See docs/architecture.md, "Operations".

* ``start()`` appends a header to the log file and spawns the command with stdout and stderr
  going there (never an unread pipe). On Linux the child is asked to receive SIGTERM when the
  thread that started it dies (``PR_SET_PDEATHSIG``), so a SIGKILLed ``memstream up`` does not
  leave a broker, a database or workers behind; :mod:`memstream.runtime.servers.leftovers` covers
  the
  rest (other platforms, a child slow to exit).
* ``stop()`` sends SIGTERM, waits ``stop_timeout``, then SIGKILLs; ``kill()`` SIGKILLs at once;
  ``terminate()`` only asks (several children then shut down in parallel).
* ``wait_ready(check)`` polls until ``check()`` is true, and fails with the log's tail when the
  child exits or the timeout passes.
* Children still running when the interpreter exits are killed (atexit), so an interrupted test
  run does not leave servers behind.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

__all__ = [
    "ChildExited",
    "ChildNotReady",
    "ChildObserver",
    "ChildProcess",
    "die_with_parent_hook",
    "observe_children",
]

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


class ChildExited(RuntimeError):
    """The child exited while we waited for it to become ready."""


class ChildNotReady(RuntimeError):
    """The child did not become ready within the timeout (it is still running)."""


class ChildObserver(Protocol):
    """Told about every child started and reaped (``memstream.runtime.servers.leftovers`` records
    them)."""

    def started(self, pid: int, name: str) -> None: ...

    def ended(self, pid: int) -> None: ...


_observers: list[ChildObserver] = []


@contextlib.contextmanager
def observe_children(observer: ChildObserver) -> Iterator[None]:
    """Tell `observer` about every child started or reaped in this process while in the block."""
    _observers.append(observer)
    try:
        yield
    finally:
        _observers.remove(observer)


def die_with_parent_hook() -> Callable[[], None] | None:
    """On Linux, a ``preexec_fn`` that makes the child get SIGTERM when this process dies.

    Only from the main thread: the signal follows the *thread* that started the child, and other
    threads (``asyncio.to_thread``, executors) may end long before the process does.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not (
        threading.main_thread()
    ):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return hook


def _chain(*hooks: Callable[[], None] | None) -> Callable[[], None] | None:
    chosen = [hook for hook in hooks if hook is not None]
    if not chosen:
        return None
    if len(chosen) == 1:
        return chosen[0]

    def run_all() -> None:
        for hook in chosen:
            hook()

    return run_all


# Killed at interpreter exit (a crashed test run, an interrupted `memstream up`).
_live: weakref.WeakSet[ChildProcess] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for child in list(_live):
        with contextlib.suppress(Exception):
            child.kill()


class ChildProcess:
    """A command run as a child process, its output appended to `log_path`.

    `new_session` puts the child in a session of its own (a terminal's Ctrl-C does not reach it;
    whoever started it stops it). `die_with_parent` asks Linux to SIGTERM it when the starting
    thread dies (see :func:`die_with_parent_hook`).
    """

    def __init__(
        self,
        name: str,
        log_path: Path,
        *,
        stop_timeout: float = 10.0,
        new_session: bool = True,
        die_with_parent: bool = True,
    ) -> None:
        self.name = name
        self.log_path = log_path
        self.stop_timeout = stop_timeout
        self.new_session = new_session
        self.die_with_parent = die_with_parent
        self.log_offset = 0
        """Size of the log when the current run started: its own output begins there."""
        self._proc: subprocess.Popen[bytes] | None = None
        self._last_returncode: int | None = None
        self._lock = threading.RLock()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit status once the child exited (negative: the signal that ended it)."""
        return self._proc.poll() if self._proc is not None else self._last_returncode

    def start(
        self,
        command: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        """Spawn `command` (``env=None`` inherits the environment); returns at once."""
        with self._lock:
            previous = self._proc
            if previous is not None:
                if previous.poll() is None:
                    raise RuntimeError(f"{self.name} is already running (pid {previous.pid})")
                self._reaped(previous)  # it crashed; this is its restart
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("ab") as output:
                self.log_offset = output.tell()
                output.write(f"\n=== memstream: starting {' '.join(command)}\n".encode())
                output.flush()
                self._proc = subprocess.Popen(
                    list(command),
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    env=None if env is None else dict(env),
                    start_new_session=self.new_session,
                    preexec_fn=_chain(
                        die_with_parent_hook() if self.die_with_parent else None, preexec_fn
                    ),
                )
            _live.add(self)
            for observer in _observers:
                observer.started(self._proc.pid, self.name)

    def terminate(self) -> None:
        """Ask the child to shut down (SIGTERM) without waiting."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self._proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM, wait up to `timeout` (default `stop_timeout`) for the exit, then SIGKILL."""
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
                    log.warning("%s did not exit %.1f s after SIGTERM; killing it", self.name, wait)
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    proc.wait()
            self._reaped(proc)

    def kill(self) -> None:
        """SIGKILL the child (no clean shutdown) and reap it."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            if proc.poll() is None:
                log.info("killing %s (pid %d)", self.name, proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait()
            self._reaped(proc)

    def wait_ready(
        self, check: Callable[[], bool], *, timeout: float, poll_interval: float = 0.1
    ) -> float:
        """Poll `check` until it is true while the child runs; returns the seconds waited.

        Raises :class:`ChildExited` or :class:`ChildNotReady` with the log's last lines.
        """
        started = time.monotonic()
        deadline = started + timeout
        while True:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                code = None if proc is None else proc.returncode
                raise ChildExited(
                    f"{self.name} exited with code {code} while starting; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            if check() and proc.poll() is None:
                return time.monotonic() - started
            if time.monotonic() >= deadline:
                raise ChildNotReady(
                    f"{self.name} not ready after {timeout:.0f} s; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(poll_interval)

    def output(self) -> bytes:
        """What the current run wrote to the log so far."""
        try:
            with self.log_path.open("rb") as log_file:
                log_file.seek(self.log_offset)
                return log_file.read()
        except OSError:
            return b""

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _reaped(self, proc: subprocess.Popen[bytes]) -> None:
        if self._proc is proc:
            self._proc = None
            self._last_returncode = proc.returncode
        _live.discard(self)
        for observer in _observers:
            observer.ended(proc.pid)
