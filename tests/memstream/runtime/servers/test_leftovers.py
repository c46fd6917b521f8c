"""`data_dir/up.json`: one `memstream up` per data directory, and no leftovers of a killed one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memstream.runtime.servers.leftovers import (
    RECORD_FILE,
    AlreadyRunning,
    RunRecord,
    _start_ticks,
    read_run_record,
)
from memstream.runtime.servers.process import ChildProcess, observe_children

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")


def gone_process() -> tuple[int, int | None]:
    """The pid and start ticks of a process that has exited."""
    probe = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = _start_ticks(probe.pid)
    probe.wait()
    return probe.pid, ticks


def write_record(
    data_dir: Path, owner: tuple[int, int | None], children: dict[int, int | None]
) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / RECORD_FILE).write_text(
        json.dumps(
            {
                "pid": owner[0],
                "ticks": owner[1],
                "children": {str(pid): {"name": "x", "ticks": t} for pid, t in children.items()},
            }
        )
    )


def test_a_running_up_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    parent = os.getppid()
    write_record(tmp_path, (parent, _start_ticks(parent)), {})
    with pytest.raises(AlreadyRunning, match=f"pid {parent}"):
        RunRecord(tmp_path).claim()


def test_leftover_children_of_a_killed_up_are_stopped(tmp_path: Path) -> None:
    orphan = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    write_record(tmp_path, gone_process(), {orphan.pid: _start_ticks(orphan.pid)})
    stopped = RunRecord(tmp_path, grace=10).claim()
    assert stopped == [orphan.pid]
    assert orphan.wait(5) == -15  # SIGTERM


def test_a_reused_pid_is_not_taken_for_a_leftover(tmp_path: Path) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        ticks = _start_ticks(bystander.pid)
        assert ticks is not None
        write_record(tmp_path, gone_process(), {bystander.pid: ticks - 1})
        assert RunRecord(tmp_path).claim() == []
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_the_record_follows_the_children_and_goes_with_a_clean_stop(tmp_path: Path) -> None:
    record = RunRecord(tmp_path)
    record.claim()
    record.describe(log="kafka", log_description="durable Apache Kafka at /x")
    child = ChildProcess("sleeper", tmp_path / "sleeper.log")
    with observe_children(record):
        child.start([sys.executable, "-c", "import time; time.sleep(600)"])
        assert child.pid is not None
        seen = read_run_record(tmp_path)
        assert seen is not None and str(child.pid) in seen["children"]
        assert seen["log_description"] == "durable Apache Kafka at /x"
        child.stop()
        seen = read_run_record(tmp_path)
        assert seen is not None and seen["children"] == {}
    record.release()
    assert read_run_record(tmp_path) is None and not (tmp_path / RECORD_FILE).exists()
