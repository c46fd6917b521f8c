"""bench/core.py and bench/report.py: figures' ratios and aims, percentiles, the Markdown table,
and its place in BENCHMARKS.md."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from bench.core import Aim, Figure, alternate, percentile
from bench.report import END, START, render_markdown, render_runs, splice_into


def test_ratio_is_ours_over_baseline_and_aim_decides_met() -> None:
    fast = Figure("ingest", "tansu", "turns/s", 950.0, 1000.0, "aiokafka", Aim(">=", 0.9))
    slow = Figure("ingest", "tansu", "turns/s", 800.0, 1000.0, "aiokafka", Aim(">=", 0.9))
    cheap = Figure("llm", "100 turns", "calls", 10.0, 100.0, "mem0-style", Aim("<=", 0.2))
    assert fast.ratio == pytest.approx(0.95) and fast.met is True
    assert slow.met is False
    assert cheap.ratio == pytest.approx(0.1) and cheap.met is True


def test_figure_without_baseline_has_no_ratio_and_no_verdict() -> None:
    figure = Figure("footprint", "window", "MB", 80.0, aim=Aim("<=", 1.0))
    assert figure.ratio is None and figure.met is None
    assert figure.to_json()["aim"] == "≤ 1"


@pytest.mark.parametrize("q", [0, 10, 50, 95, 99, 100])
def test_percentile_matches_numpy_linear_interpolation(q: float) -> None:
    values = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0]
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_alternate_switches_which_side_runs_first() -> None:
    assert [first for _, first in alternate(4)] == [True, False, True, False]


def report_with(figures: list[Figure], error: str | None = None) -> dict[str, Any]:
    suites: dict[str, Any] = {"ingest": {"figures": [f.to_json() for f in figures]}}
    if error:
        suites["window"] = {"error": error}
    return {
        "command": "python -m bench all --quick",
        "started_at": "2026-11-30T22:00:00+00:00",
        "finished_at": "2026-11-30T22:05:00+00:00",
        "machine": {"cpus": 2, "processor": "x86_64", "python": "3.11.7"},
        "load_average_before": [1.0, 1.0, 1.0],
        "load_average_after": [2.0, 1.5, 1.0],
        "profile": "quick",
        "suites": suites,
    }


def test_markdown_has_a_row_per_figure_and_names_failed_suites() -> None:
    figure = Figure("ingest", "apache", "turns/s", 950.0, 1000.0, "raw aiokafka", Aim(">=", 0.9))
    table = render_markdown(report_with([figure], error="RuntimeError: boom"), "x.json")
    assert (
        "| ingest | apache | 950 turns/s | 1,000 turns/s (raw aiokafka) | 0.95 | ≥ 0.9 | yes |"
        in table
    )
    assert "- `window` failed: RuntimeError: boom" in table
    assert "`x.json`" in table


def test_markdown_keeps_the_figures_of_a_suite_that_failed_in_part_and_names_the_part() -> None:
    figure = Figure("scale", "tansu", "s", 2.0, 1.0, "same at 1k", Aim("<=", 1.3))
    report = report_with([])
    report["suites"]["scale"] = {
        "figures": [figure.to_json()],
        "errors": ["history on apache: TimeoutError: stuck"],
    }
    table = render_markdown(report, "x.json")
    assert "| scale | tansu | 2.00 s |" in table
    assert "- `scale` failed in part: history on apache: TimeoutError: stuck" in table


def test_splice_replaces_only_the_marked_block() -> None:
    document = f"# Benchmarks\n\nintro\n\n{START}\nold table\n{END}\n\n## Ingest\nkept\n"
    spliced = splice_into(document, "new table\n")
    assert "old table" not in spliced and "new table" in spliced
    assert spliced.startswith("# Benchmarks\n\nintro") and spliced.endswith("## Ingest\nkept\n")
    assert splice_into(spliced, "newer\n").count(START) == 1


def test_splice_appends_a_marked_block_when_there_is_none() -> None:
    spliced = splice_into("# Benchmarks\n", "table\n")
    assert spliced == f"# Benchmarks\n\n{START}\ntable\n{END}\n"


def test_a_table_of_several_runs_describes_each_run_and_keeps_every_figure() -> None:
    ingest = Figure("ingest", "apache", "turns/s", 950.0, 1000.0, "raw aiokafka", Aim(">=", 0.9))
    first, second = report_with([ingest]), report_with([ingest])
    second["suites"] = {"window": second["suites"].pop("ingest")}
    table = render_runs([(first, "a.json"), (second, "b.json")])
    assert "- ingest: `python -m bench all --quick`" in table and "`a.json`" in table
    assert "- window: " in table and "`b.json`" in table
    assert table.count("| ingest | apache |") == 2
