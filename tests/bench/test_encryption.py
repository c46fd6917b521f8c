"""The encryption suite: its workloads, its sealed log, and a quick run on Tansu (speed is not
asserted: the figures are ratios for BENCHMARKS.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.projection_workload import generate
from bench.suites.encryption import (
    INGEST_WORKLOADS,
    SESSIONS,
    FreshKeys,
    sealed_records,
    sessions_of,
)
from bench.suites.projection import records
from events.codec import decode
from handlers.sealed_events import opener

ROOT = Path(__file__).resolve().parents[2]


def test_continuing_sessions_reuse_twenty_sessions_and_the_worst_case_opens_one_per_call() -> None:
    continuing, new = (sessions_of(workload, 100, "r0s") for workload in INGEST_WORKLOADS)

    assert len({session for _, session in continuing}) == SESSIONS
    assert len({session for _, session in new}) == 100
    assert sessions_of(INGEST_WORKLOADS[0], 100, "r1s") != continuing  # fresh ids per round


def test_the_sealed_log_holds_no_plaintext_content_and_opens_to_the_plaintext_log() -> None:
    workload = generate(3, users=2, sessions=1, snapshots=2)
    ring = FreshKeys()
    plain, sealed = records(workload), sealed_records(workload, ring)

    for kind in plain:
        assert [key for key, _ in sealed[kind]] == [key for key, _ in plain[kind]]
        for (_, plain_value), (_, sealed_value) in zip(plain[kind], sealed[kind], strict=True):
            assert decode(sealed_value, opener(ring)) == decode(plain_value)
    turn = workload.turns[0]
    assert turn.content.encode() not in sealed["turns"][0][1]


@pytest.mark.integration
def test_quick_run_on_tansu_reports_every_figure_as_sealed_over_plaintext(tmp_path: Path) -> None:
    options = ["--quick", "--brokers", "tansu", "--out-dir", str(tmp_path), "--name", "enc"]
    result = subprocess.run(
        [sys.executable, "-m", "bench", "encryption", *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    suite = json.loads((tmp_path / "enc.json").read_text())["suites"]["encryption"]
    figures = suite["figures"]
    names = {(f["benchmark"], f["setting"]) for f in figures}
    for benchmark in (
        "encryption: ingest, continuing sessions",
        "encryption: ingest, new session every 10 turns",
        "encryption: replay",
        "encryption: replay, reading the log",
    ):
        assert (benchmark, "tansu") in names
    for benchmark in ("write a turn record", "read a turn record", "turn record size"):
        settings = [s for b, s in names if b == f"encryption: {benchmark}"]
        assert len(settings) == 3  # 60 B, 300 B, 4,000 B content
    assert any(b == "encryption: log record size" for b, _ in names)
    for figure in figures:  # every figure: sealed (ours) against plaintext, same run
        assert figure["ours"] > 0 and figure["baseline"] > 0, figure
        assert figure["ratio"] == pytest.approx(figure["ours"] / figure["baseline"])
    assert suite["raw"]["tansu"]["projection"]["replay_differences"] == []
    assert "encryption: ingest" in (tmp_path / "enc.md").read_text()
