"""`python -m bench.window_topic_shift`, on a few turns: both sides run and the ratio is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.window_topic_shift import main

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_short_run_reports_turns_per_second_with_the_trigger_on_and_off(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert main(["--turns", "40", "--rounds", "1", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["turns_per_s"]["on"] > 0 and report["turns_per_s"]["off"] > 0
    assert [len(report["sides"][side]) for side in ("on", "off")] == [1, 1]
