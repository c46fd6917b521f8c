"""Supervising stage workers: the restart policy (pure, with a test clock), the supervisor over
real child processes standing in for stages, `memstream up`'s exit, and a real pipeline."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tenacity import wait_exponential, wait_fixed

import memstream.cli.main as cli
import memstream.runtime.pipeline as runtime
import memstream.runtime.supervisor as supervisor
from memstream.runtime.pipeline import Pipeline
from memstream.runtime.supervisor import (
    FAIL_FAST,
    CrashHistory,
    GiveUp,
    Restart,
    RestartPolicy,
    StageGaveUp,
    Supervisor,
    describe_exit,
)
from memstream.runtime.worker import READY_MARKER
from tests.support.pipeline import PipelineHarness, eventually

EXACT = wait_exponential(multiplier=1, max=30)  # the default's steps without its jitter


class Clock:
    """Seconds that pass only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


class Stage:
    """One stage as the policy sees it: started at some time, crashing at another."""

    def __init__(self, policy: RestartPolicy, clock: Clock) -> None:
        self.policy = policy
        self.clock = clock
        self.history = CrashHistory()
        self.started_at = clock()

    def crash_after(self, uptime: float) -> Restart | GiveUp:
        crashed_at = self.clock.advance(uptime)
        decision, self.history = self.policy.decide(
            self.history, started_at=self.started_at, crashed_at=crashed_at
        )
        if isinstance(decision, Restart):
            self.started_at = self.clock.advance(decision.delay)
        return decision


# -- the policy ----------------------------------------------------------------------------------


def test_back_off_doubles_from_one_second_and_stops_growing_at_thirty() -> None:
    stage = Stage(RestartPolicy(max_crashes=100, wait=EXACT), Clock())
    decisions = [stage.crash_after(1.0) for _ in range(8)]
    assert decisions == [
        Restart(1, 1.0),
        Restart(2, 2.0),
        Restart(3, 4.0),
        Restart(4, 8.0),
        Restart(5, 16.0),
        Restart(6, 30.0),
        Restart(7, 30.0),
        Restart(8, 30.0),
    ]


def test_the_default_back_off_adds_up_to_one_second_of_jitter_within_the_cap() -> None:
    policy = RestartPolicy()
    for attempt, base in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 16.0)]:
        delays = [policy.delay(attempt) for _ in range(50)]
        assert all(base <= d <= base + 1.0 for d in delays), (attempt, delays)
        assert len(set(delays)) > 1  # jittered, not one fixed value
    assert all(policy.delay(attempt) == 30.0 for attempt in (6, 10, 100))


def test_a_crash_after_a_minute_up_starts_the_back_off_again() -> None:
    stage = Stage(RestartPolicy(max_crashes=100, wait=EXACT), Clock())
    assert [stage.crash_after(2.0) for _ in range(3)] == [
        Restart(1, 1.0),
        Restart(2, 2.0),
        Restart(3, 4.0),
    ]
    assert stage.crash_after(60.0) == Restart(1, 1.0)
    assert stage.crash_after(2.0) == Restart(2, 2.0)


def test_a_crash_just_under_a_minute_up_continues_the_streak() -> None:
    stage = Stage(RestartPolicy(max_crashes=100, wait=EXACT), Clock())
    stage.crash_after(2.0)
    stage.crash_after(2.0)
    assert stage.crash_after(59.9) == Restart(3, 4.0)


def test_the_fifth_crash_within_five_minutes_gives_up() -> None:
    stage = Stage(RestartPolicy(wait=EXACT), Clock())
    assert all(isinstance(stage.crash_after(1.0), Restart) for _ in range(4))
    assert stage.crash_after(1.0) == GiveUp(crashes=5)


def test_a_stage_crashing_every_61_seconds_is_given_up_on_though_its_back_off_resets() -> None:
    stage = Stage(RestartPolicy(wait=EXACT), Clock())
    assert [stage.crash_after(61.0) for _ in range(4)] == [Restart(1, 1.0)] * 4
    assert stage.crash_after(61.0) == GiveUp(crashes=5)  # 5 crashes within 4 * 62 + 61 s


def test_crashes_older_than_the_window_are_forgotten() -> None:
    stage = Stage(RestartPolicy(wait=EXACT), Clock())
    decisions = [stage.crash_after(100.0) for _ in range(20)]  # at most 3 within 300 s
    assert all(isinstance(d, Restart) for d in decisions)
    assert len(stage.history.recent) == 3


def test_the_give_up_threshold_and_window_are_configurable() -> None:
    stage = Stage(RestartPolicy(max_crashes=2, window=10.0, wait=EXACT), Clock())
    assert stage.crash_after(1.0) == Restart(1, 1.0)
    assert stage.crash_after(9.5) == Restart(2, 2.0)  # 10.5 s after the first: out of the window
    assert stage.crash_after(1.0) == GiveUp(crashes=2)  # 3 s after the second


def test_fail_fast_gives_up_at_the_first_crash() -> None:
    assert Stage(FAIL_FAST, Clock()).crash_after(3600.0) == GiveUp(crashes=1)


def test_exits_are_described_by_code_or_signal() -> None:
    assert describe_exit(1) == "exited with code 1"
    assert describe_exit(0) == "exited with code 0"
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert describe_exit(-15) == "was killed by SIGTERM"


# -- the supervisor over stand-in stage processes (real children, no Kafka) ------------------------

STAND_IN = """
import pathlib, sys, time
ready, stage, crashes, path = sys.argv[1:]
print(ready, stage, file=sys.stderr, flush=True)
runs_file = pathlib.Path(path)
runs = int(runs_file.read_text()) + 1 if runs_file.exists() else 1
runs_file.write_text(str(runs))
if int(crashes) < 0 or runs <= int(crashes):
    time.sleep(0.3)
    print(f"boom: {stage} run {runs} cannot reach the broker", file=sys.stderr, flush=True)
    sys.exit(3)
time.sleep(60)
"""


def stand_in(stage: str, tmp_path: Path, *, crashes: int) -> list[str]:
    """A stage that prints the ready marker, crashes on its first `crashes` runs (-1: always)
    with exit code 3, then stays up."""
    runs_file = str(tmp_path / f"{stage}.runs")
    return [sys.executable, "-c", STAND_IN, READY_MARKER, stage, str(crashes), runs_file]


def stand_in_pipeline(tmp_path: Path, crashes: dict[str, int]) -> Pipeline:
    return Pipeline(
        list(crashes),
        {},
        tmp_path / "logs",
        commands={stage: stand_in(stage, tmp_path, crashes=n) for stage, n in crashes.items()},
    )


QUICK = RestartPolicy(max_crashes=3, wait=wait_fixed(0.2))


def supervise_until(sup: Supervisor, done: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not done after {timeout}s"
        sup.check()
        time.sleep(0.05)


def test_a_stage_that_crashes_once_is_restarted_and_ready_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="memstream.runtime.supervisor")
    with stand_in_pipeline(tmp_path, {"steady": 0, "flaky": 1}) as pipeline:
        sup = Supervisor(pipeline, QUICK, interval=0.05)
        flaky = pipeline.processes["flaky"]
        supervise_until(sup, lambda: sup.restarts["flaky"] == 1 and flaky.is_ready())
        supervise_until(sup, lambda: "stage flaky is ready again" in caplog.text)
        time.sleep(0.6)  # past the first run's crash time: the second run stays up
        sup.check()
        assert flaky.running and pipeline.processes["steady"].running
        assert sup.restarts == {"steady": 0, "flaky": 1}
    crash = next(r.getMessage() for r in caplog.records if "restarting it in" in r.getMessage())
    assert crash.startswith("stage flaky exited with code 3 after ")
    assert crash.endswith("restarting it in 0.2s (attempt 1)")
    assert "stage flaky restarted (attempt 1)" in caplog.text


def test_a_stage_that_keeps_crashing_is_given_up_on_and_every_stage_stopped(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    with stand_in_pipeline(tmp_path, {"steady": 0, "doomed": -1}) as pipeline:
        sup = Supervisor(pipeline, QUICK, interval=0.05)
        with pytest.raises(StageGaveUp) as gave_up:
            sup.run()
        assert not any(p.running for p in pipeline.processes.values())
    assert gave_up.value.stage == "doomed"
    message = str(gave_up.value)
    assert message.startswith("stage doomed exited with code 3 after ")
    assert "(crash 3 within 300s); giving up" in message
    assert "boom: doomed run 3 cannot reach the broker" in message  # the log tail
    assert sup.restarts["doomed"] == 2
    assert time.monotonic() - started < 15


LEAVER = """
import pathlib, sys, time
ready, stage, path = sys.argv[1:]
print(ready, stage, file=sys.stderr, flush=True)
runs_file = pathlib.Path(path)
runs = int(runs_file.read_text()) + 1 if runs_file.exists() else 1
runs_file.write_text(str(runs))
if runs == 1:
    time.sleep(0.3)
    sys.exit(75)  # memstream.runtime.served.SWITCHED_EXIT
time.sleep(60)
"""


def test_a_stage_that_left_for_the_served_lineage_is_started_again_at_once_without_a_crash(
    tmp_path: Path,
) -> None:
    runs = str(tmp_path / "leaver.runs")
    switches: list[float] = []
    with Pipeline(
        ["leaver"],
        {},
        tmp_path / "logs",
        commands={"leaver": [sys.executable, "-c", LEAVER, READY_MARKER, "leaver", runs]},
    ) as pipeline:
        # FAIL_FAST gives up at the first crash: leaving for the served lineage is none
        sup = Supervisor(pipeline, FAIL_FAST, interval=0.05, on_switch=lambda: switches.append(1))
        leaver = pipeline.processes["leaver"]
        supervise_until(sup, lambda: sup.restarts["leaver"] == 1 and leaver.is_ready())
        assert len(switches) == 1
        assert sup.state()["leaver"]["last_exit"] == "left for the newly served read model"
        assert sup.history["leaver"].streak == 0


STUBBORN = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(sys.argv[1], sys.argv[2], file=sys.stderr, flush=True)
time.sleep(60)
"""


def test_stopping_kills_the_workers_that_ignore_sigterm_at_one_shared_deadline(
    tmp_path: Path,
) -> None:
    stages = ["a", "b", "c", "d"]
    # SIGTERM ignored from the first instruction on (an ignored signal survives exec): on a
    # loaded machine a worker could otherwise die of it before its own handler is installed.
    ignoring = ["sh", "-c", 'trap "" TERM; exec "$0" "$@"']
    commands = {
        stage: [*ignoring, sys.executable, "-c", STUBBORN, READY_MARKER, stage] for stage in stages
    }
    pipeline = Pipeline(stages, {}, tmp_path / "logs", commands=commands).start()
    started = time.monotonic()
    pipeline.stop(timeout=3.0)
    stopped_after = time.monotonic() - started
    assert not any(process.running for process in pipeline.processes.values())
    assert {process.returncode for process in pipeline.processes.values()} == {-9}
    assert stopped_after < 8.0  # one 3 s deadline for all four, not 3 s for each in turn


@contextmanager
def stand_in_running_pipeline(
    settings: Any, tmp_path: Path, crashes: dict[str, int]
) -> Iterator[tuple[Any, Any, Pipeline]]:
    with stand_in_pipeline(tmp_path, crashes) as pipeline:
        yield settings, runtime.Infrastructure("127.0.0.1:1", "mongodb://127.0.0.1:2"), pipeline


def test_up_exits_1_naming_the_stage_that_keeps_crashing_and_its_log_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        runtime,
        "running_pipeline",
        lambda settings, **_: stand_in_running_pipeline(
            settings, tmp_path, {"steady": 0, "doomed": -1}
        ),
    )
    monkeypatch.setattr(supervisor, "RestartPolicy", lambda: QUICK)
    monkeypatch.setattr(cli, "_refuse_if_unready", lambda settings: None)
    monkeypatch.setattr(cli, "_stop_on_signals", lambda: None)  # not in the test process
    monkeypatch.chdir(tmp_path)

    assert cli.main(["up"]) == 1
    err = capsys.readouterr().err
    assert "memstream: stage doomed exited with code 3" in err
    assert "boom: doomed run 3 cannot reach the broker" in err


# -- a real pipeline -----------------------------------------------------------------------------


@pytest.mark.integration
def test_a_sigkilled_window_worker_is_restarted_and_promotes_again(
    pipeline_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="memstream.runtime.supervisor")
    harness: PipelineHarness = pipeline_factory()
    sup = Supervisor(harness.pipeline, RestartPolicy(wait=wait_fixed(0.5)), interval=0.2)
    harness.pipeline.processes["window"].kill()

    supervise_until(sup, lambda: "stage window is ready again" in caplog.text, timeout=60)
    assert "stage window was killed by SIGKILL" in caplog.text
    harness.record(
        "tim",
        "after-restart",
        [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(4)],
    )
    eventually(
        lambda: (sup.check(), harness.snapshots(user_id="tim"))[1],
        lambda snapshots: len(snapshots) == 1,
        timeout=60,
        what="the count promotion by the restarted window",
    )
    assert sup.restarts == {stage: int(stage == "window") for stage in harness.pipeline.processes}
