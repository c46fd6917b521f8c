"""The child process shared by the servers and the stage workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memstream.runtime.servers.process import ChildExited, ChildNotReady, ChildProcess
from tests.support.pipeline import eventually

SLEEPER = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_readiness_waits_on_the_log_and_a_stop_sends_sigterm(tmp_path: Path) -> None:
    child = ChildProcess("sleeper", tmp_path / "sleeper.log", stop_timeout=5)
    child.start(SLEEPER)
    child.wait_ready(lambda: b"up" in child.output(), timeout=30)
    assert child.running and child.pid is not None
    child.stop()
    assert not child.running and child.returncode == -signal.SIGTERM
    assert "=== memstream: starting" in child.log_tail()


def test_a_second_run_reads_only_its_own_output(tmp_path: Path) -> None:
    child = ChildProcess("echo", tmp_path / "echo.log")
    child.start([sys.executable, "-c", "print('first')"])
    eventually(lambda: child.returncode, lambda code: code == 0, what="the first run's exit")
    child.start([sys.executable, "-c", "print('second')"])
    eventually(lambda: child.returncode, lambda code: code == 0, what="the second run's exit")
    assert b"second" in child.output() and b"first" not in child.output()


def test_a_child_that_exits_while_starting_fails_with_its_log(tmp_path: Path) -> None:
    child = ChildProcess("failing", tmp_path / "failing.log")
    child.start([sys.executable, "-c", "print('bad config'); raise SystemExit(3)"])
    with pytest.raises(ChildExited, match=r"code 3(.|\n)*bad config"):
        child.wait_ready(lambda: False, timeout=30)


def test_a_child_that_never_gets_ready_times_out_and_can_be_killed(tmp_path: Path) -> None:
    child = ChildProcess("slow", tmp_path / "slow.log")
    child.start(SLEEPER)
    with pytest.raises(ChildNotReady, match="not ready after"):
        child.wait_ready(lambda: False, timeout=0.5)
    child.kill()
    assert child.returncode == -signal.SIGKILL


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_children_die_with_a_sigkilled_parent(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from pathlib import Path
                from memstream.runtime.servers.process import ChildProcess
                child = ChildProcess("sleeper", Path({str(tmp_path / "child.log")!r}))
                child.start({SLEEPER!r})
                print(child.pid, flush=True)
                time.sleep(600)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    assert alive(pid)
    parent.kill()
    parent.wait()
    eventually(lambda: alive(pid), lambda running: not running, timeout=20, what="the orphan")
