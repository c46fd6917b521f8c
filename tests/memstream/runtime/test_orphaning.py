"""A process `memstream up` started does not outlive it (`memstream.runtime.orphaning`):
a worker whose shutdown hangs, and the database whose SIGTERM never reached its main thread.

Each test starts a parent that starts the watched process *without* ``PR_SET_PDEATHSIG``, then
SIGKILLs the parent: what stops the child is its own watch, nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memstream.runtime.servers import free_port
from memstream.runtime.servers.loopback import port_open
from memstream.runtime.servers.secantus_daemon import GRACE_SECONDS, SHUTDOWN_SECONDS

IGNORING_SIGTERM = textwrap.dedent(
    """
    import signal, sys, time
    from memstream.runtime.orphaning import exit_when_orphaned
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a worker stuck in its shutdown
    exit_when_orphaned(grace=0.5, name="test worker")
    print("watching", flush=True)
    time.sleep(120)
    """
)


def parent_of(command: list[str]) -> str:
    """A parent that starts `command` (stdout shared), prints its pid and waits."""
    return textwrap.dedent(
        f"""
        import subprocess, sys, time
        child = subprocess.Popen({command!r}, stdout=sys.stdout, stderr=subprocess.DEVNULL)
        print(child.pid, flush=True)
        time.sleep(300)
        """
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def seconds_to_die(pid: int, *, timeout: float) -> float:
    start = time.monotonic()
    while _alive(pid) and time.monotonic() - start < timeout:
        time.sleep(0.1)
    assert not _alive(pid), f"process {pid} still runs {timeout:.0f} s after its parent died"
    return time.monotonic() - start


def test_a_worker_whose_parent_died_exits_within_its_grace_even_ignoring_sigterm() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_of([sys.executable, "-c", IGNORING_SIGTERM])],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    assert parent.stdout.readline().strip() == "watching"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    seconds_to_die(worker, timeout=15)


@pytest.mark.integration
def test_a_database_whose_parent_died_unannounced_stops_itself_before_its_grace_runs_out(
    tmp_path: Path,
) -> None:
    port = free_port()
    daemon = [sys.executable, "-m", "memstream.runtime.servers.secantus_daemon"]
    daemon += ["--host", "127.0.0.1", "--port", str(port), "--storage-path", str(tmp_path)]
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_of(daemon)], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    database = int(parent.stdout.readline())
    deadline = time.monotonic() + 60
    while not port_open(port):  # it listens once its signal handlers are set
        assert time.monotonic() < deadline, "the database did not start"
        time.sleep(0.1)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    # Stopped by the SIGTERM to its main thread, not by the exit after the grace period.
    assert seconds_to_die(database, timeout=60) < SHUTDOWN_SECONDS + GRACE_SECONDS
