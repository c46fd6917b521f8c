"""Test-only fault points: crash a worker at a precise moment, to prove it loses nothing.

`MEMSTREAM_FAULT_POINT=<name>` in a worker's environment makes `fault_point(<name>)` kill the
worker's own process with SIGKILL — no cleanup, no flush, exactly like a crash. Unset (always,
outside tests) a fault point does nothing. The points, and the window each one opens:

* `extraction.after_result_sent` — an extraction result is in the log, its progress is not.
* `projector.after_project` — a record's writes are in MongoDB, its applied offset is not
  (`projector.after_project:MemoryReinforced` only after a record that reinforced a memory:
  a detail names the record's event type or one of its decisions' types).
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger(__name__)
ENVIRONMENT_VARIABLE = "MEMSTREAM_FAULT_POINT"


def fault_point(name: str, *details: str) -> None:
    """Crash here (SIGKILL) if the environment names this fault point (or `name:<a detail>`)."""
    if os.environ.get(ENVIRONMENT_VARIABLE) in (name, *(f"{name}:{d}" for d in details)):
        log.warning("fault point %s: killing this worker", name)
        os.kill(os.getpid(), signal.SIGKILL)
