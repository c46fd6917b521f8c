"""``python -m memstream.runtime.servers.secantus_daemon ARGS``: SecantusDB's daemon
(``secantusd-py ARGS``) that does not outlive the process that started it.

``secantusd-py`` waits for its stop in the main thread, on an event without a timeout. A SIGTERM
the kernel hands to one of its other threads (WiredTiger's, a connection's) marks Python's
handler as due but never wakes the main thread to run it, and the server runs on. A SIGKILLed
`memstream up` left its database running that way (about one kill in ten under load; a second
SIGTERM stopped it), holding its port and its folder.

So, once the parent is gone: a few seconds for the SIGTERM of ``PR_SET_PDEATHSIG``
(:mod:`memstream.runtime.servers.process`) to do its work, then a SIGTERM to the main thread
itself, which wakes it; and if the server still runs after the grace period, an exit regardless.
The journal (WiredTiger's log, on for every on-disk SecantusDB) makes that exit as durable as a
SIGKILL. See docs/architecture.md, "Operations".
"""

from __future__ import annotations

import sys
import time

from secantus.cli import main

from memstream.runtime.orphaning import exit_when_orphaned, signal_main_thread

SHUTDOWN_SECONDS = 3.0
"""How long the kernel's SIGTERM may take to stop the server before it is sent to the main
thread (a clean stop takes a fraction of a second)."""
GRACE_SECONDS = 10.0
"""How long after that the server may still take before the process exits regardless."""


def _stop_cleanly() -> None:
    time.sleep(SHUTDOWN_SECONDS)
    signal_main_thread()


def run(arguments: list[str]) -> int:
    exit_when_orphaned(GRACE_SECONDS, name="memstream database", on_orphaned=_stop_cleanly)
    return int(main(arguments))


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
