"""The cost of reranking past messages by meaning: a distinct history of the size asked, and
every timing reported (the timings themselves are the benchmark's, not asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.recall_meaning_cost import history, main


def test_the_history_is_as_long_as_asked_and_no_two_messages_are_equal() -> None:
    messages = history(150)
    assert len(messages) == 150 and len({m.text for m in messages}) == 150


def test_the_report_gives_each_timing_for_the_questions_asked(
    tmp_path: Path,
) -> None:
    out = tmp_path / "cost.json"
    assert main(["--messages", "60", "--questions", "2", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    seconds = report["median_seconds"]
    assert set(seconds) == {"keywords", "meaning_cold", "meaning_shared", "meaning_again"}
    assert report["questions"] == 2 and report["texts_embedded_per_cold_call"] >= 1
    assert all(value >= 0 for value in seconds.values())
