"""A worker `memstream up` started does not outlive it
(`memstream.runtime.worker.watch_for_orphaning`):
when up dies with the broker, Faust's own shutdown can wait minutes for a group coordinator."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

GRANDCHILD = textwrap.dedent(
    """
    import signal, sys, time
    from memstream.runtime.worker import watch_for_orphaning
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a worker stuck in its shutdown
    watch_for_orphaning(grace=0.5)
    print("watching", flush=True)
    time.sleep(120)
    """
)
PARENT = textwrap.dedent(
    f"""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", {GRANDCHILD!r}], stdout=sys.stdout)
    print(child.pid, flush=True)
    time.sleep(120)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def test_a_worker_whose_parent_died_exits_within_its_grace_even_ignoring_sigterm() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    assert parent.stdout.readline().strip() == "watching"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 15
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(worker)
