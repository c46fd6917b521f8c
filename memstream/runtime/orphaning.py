"""A process `memstream up` started does not outlive it, whatever its own shutdown does.

`up` starts every child with ``PR_SET_PDEATHSIG`` = SIGTERM
(:mod:`memstream.runtime.servers.process`), so the kernel asks them to stop when `up` dies.
Asking is not always enough (docs/architecture.md, "Operations"):

* a stage worker's Faust shutdown waits for the group coordinator -- for minutes when the broker
  died with `up`;
* SecantusDB waits for its stop in the main thread without a timeout, and a SIGTERM the kernel
  hands to one of its other threads never wakes it
  (:mod:`memstream.runtime.servers.secantus_daemon`).

:func:`exit_when_orphaned` watches for the parent's death from a thread of its own and exits
the process a grace period after it, having first given the process's own shutdown that long.
Exiting uncleanly is a crash the pipeline is made to survive (at-least-once, idempotent
effects), and one the database's journal makes durable.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

__all__ = ["ORPHAN_GRACE_SECONDS", "exit_when_orphaned", "signal_main_thread"]

ORPHAN_GRACE_SECONDS = 20.0
"""How long a process whose parent died may take to shut down before it exits regardless."""


def exit_when_orphaned(
    grace: float = ORPHAN_GRACE_SECONDS,
    *,
    name: str,
    on_orphaned: Callable[[], None] | None = None,
    poll_interval: float = 1.0,
) -> None:
    """Exit at most `grace` seconds (plus one poll) after the process that started this one died.

    `on_orphaned` runs once the death is noticed, before the grace period starts. Call this early:
    the parent is the one alive when it is called."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_interval)
        if on_orphaned is not None:
            on_orphaned()
        time.sleep(grace)
        print(f"{name}: its parent is gone; exiting", file=sys.stderr, flush=True)
        os._exit(1)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def signal_main_thread(signum: signal.Signals = signal.SIGTERM) -> None:
    """Send `signum` to this process's main thread, not to the process.

    A process-directed signal may be handed to any thread; Python then runs its handler only when
    the main thread next wakes, which one waiting on a lock without a timeout never does. A
    thread-directed one interrupts that wait."""
    main = threading.main_thread().ident
    if main is not None:
        signal.pthread_kill(main, signum)
