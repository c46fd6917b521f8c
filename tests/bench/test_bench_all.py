"""`python -m bench all --quick`, the CI profile of the benchmarks: every suite runs on the chosen
brokers and reports its figures (speed is not asserted: the figures are ratios for BENCHMARKS.md,
and CI machines are noisy)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import SUITES
from tests.support.brokers import chosen_brokers

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.slow]


SUITE_GROUPS = {
    "log-and-scale": ("ingest", "window", "projection", "search", "scale"),
    "llm": ("llm_cost", "extraction_time", "freshness", "footprint"),
    "answers-and-keys": ("locomo", "sealing", "encryption", "metrics"),
}
"""The suites in three runs, so the test processes share the profile's ten minutes. The
scale suite takes its window, projection and search figures from the same run (else it measures
them again), so it runs with them."""


def test_the_groups_cover_every_suite_once() -> None:
    grouped = [suite for group in SUITE_GROUPS.values() for suite in group]
    assert sorted(grouped) == sorted(SUITES) and len(grouped) == len(set(grouped))


@pytest.mark.parametrize("group", list(SUITE_GROUPS))
def test_quick_profile_runs_each_suite_of_its_group_and_reports_figures(
    group: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The first broker chosen: the suites' code is the same on each, and the integration suite
    # runs on every broker already (both brokers doubled the longest test of the run).
    broker = chosen_brokers(request.config)[0]
    suites = SUITE_GROUPS[group]
    options = ["--quick", "--brokers", broker, "--out-dir", str(tmp_path), "--name", "ci"]
    result = subprocess.run(
        [sys.executable, "-m", "bench", "all", "--only", ",".join(suites), *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=2400,
    )
    report = json.loads((tmp_path / "ci.json").read_text())
    errors = {
        name: s.get("error") or s.get("errors")
        for name, s in report["suites"].items()
        if "error" in s or "errors" in s
    }
    assert not errors, result.stderr[-4000:]
    assert result.returncode == 0, result.stderr[-4000:]
    assert list(report["suites"]) == [s for s in SUITES if s in suites]
    for name, suite in report["suites"].items():
        assert suite["figures"], f"{name} reported no figures"
    table = (tmp_path / "ci.md").read_text()
    assert table.count("\n| ") >= sum(len(s["figures"]) for s in report["suites"].values())
