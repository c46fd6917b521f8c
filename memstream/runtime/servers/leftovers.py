"""``data_dir/up.json``: which ``memstream up`` owns a data directory, its children, and its log.

A SIGKILLed ``memstream up`` cannot stop its children. On Linux they get SIGTERM from the kernel
(``PR_SET_PDEATHSIG``, :mod:`memstream.runtime.servers.process`), but a broker takes seconds to shut
down and still holds its data folder's lock meanwhile. So ``up`` writes this file while it runs:
its own pid and every child's pid (each with its start time, so a reused pid is never taken for
one), rewritten as children start and end. The next ``up`` on the same data directory
(:meth:`RunRecord.claim`):

* refuses to start while the recorded ``up`` still runs (two of them would share the folders);
* otherwise stops the recorded children still alive (SIGTERM, then SIGKILL after a grace
  period) and waits until they are gone, so the broker's lock and ports are free.

``memstream status`` reads the file to say which log is in use. See docs/architecture.md,
"Operations".
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

__all__ = ["AlreadyRunning", "RunRecord", "read_run_record"]

log = logging.getLogger(__name__)

RECORD_FILE = "up.json"


class AlreadyRunning(RuntimeError):
    """Another ``memstream up`` runs on this data directory."""


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), ``None`` if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie holds nothing
        return None
    return int(fields[19])


def _alive(pid: int, ticks: int | None) -> bool:
    """The process recorded as (`pid`, `ticks`) still runs."""
    if Path("/proc").is_dir():
        return ticks is not None and _start_ticks(pid) == ticks
    try:  # no /proc: the pid alone (a reused pid may be taken for it)
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_run_record(data_dir: Path) -> dict[str, Any] | None:
    """The record of the ``memstream up`` running on `data_dir`, ``None`` if none runs."""
    try:
        record = json.loads((data_dir / RECORD_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not _alive(int(record["pid"]), record.get("ticks")):
        return None
    return record


class RunRecord:
    """The record of this process's ``memstream up`` on `data_dir` (a ChildObserver)."""

    def __init__(self, data_dir: Path, *, grace: float = 30.0) -> None:
        self.path = data_dir / RECORD_FILE
        self.grace = grace
        self._record: dict[str, Any] = {
            "pid": os.getpid(),
            "ticks": _start_ticks(os.getpid()),
            "children": {},
        }

    def claim(self) -> list[int]:
        """Refuse if the recorded ``up`` runs; stop its leftover children; returns their pids."""
        try:
            previous = json.loads(self.path.read_text())
        except (OSError, ValueError):
            previous = None
        stopped: list[int] = []
        if isinstance(previous, dict):
            owner = int(previous.get("pid", 0))
            if owner != os.getpid() and _alive(owner, previous.get("ticks")):
                raise AlreadyRunning(
                    f"memstream up (pid {owner}) is already running on {self.path.parent}; "
                    "stop it first, or use another MEMSTREAM_DATA_DIR"
                )
            children = {
                int(pid): child.get("ticks")
                for pid, child in dict(previous.get("children", {})).items()
            }
            stopped = self._stop_leftovers(children)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write()
        return stopped

    def describe(self, **fields: Any) -> None:
        """Record what ``status`` should know (the log in use, the addresses)."""
        self._record.update(fields)
        self._write()

    def started(self, pid: int, name: str) -> None:
        self._record["children"][str(pid)] = {"name": name, "ticks": _start_ticks(pid)}
        self._write()

    def ended(self, pid: int) -> None:
        if self._record["children"].pop(str(pid), None) is not None:
            self._write()

    def release(self) -> None:
        """Remove the record (``up`` stopped cleanly)."""
        with contextlib.suppress(OSError):
            current = json.loads(self.path.read_text())
            if int(current.get("pid", 0)) == os.getpid():
                self.path.unlink()

    def __enter__(self) -> Self:
        self.claim()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def _write(self) -> None:
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        temporary.write_text(json.dumps(self._record, indent=1))
        os.replace(temporary, self.path)

    def _stop_leftovers(self, children: dict[int, int | None]) -> list[int]:
        alive = [pid for pid, ticks in children.items() if _alive(pid, ticks)]
        if not alive:
            return []
        log.warning(
            "stopping %d leftover processes of a previous memstream up: %s", len(alive), alive
        )
        for pid in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline and any(_alive(p, children[p]) for p in alive):
            time.sleep(0.2)
        for pid in alive:
            if _alive(pid, children[pid]):
                log.warning(
                    "leftover process %d ignored SIGTERM for %.0fs; killing it", pid, self.grace
                )
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p, children[p]) for p in alive):
            time.sleep(0.1)
        return alive
