"""The search suite's pure helpers: the numpy baseline, recall@k, the growth figure and the first
search's figures."""

from __future__ import annotations

import numpy as np

from bench.suites.search import SizeRun, figures, normalised, numpy_top_k, recall_at_k


def test_numpy_top_k_returns_the_rows_with_the_highest_cosine_best_first() -> None:
    rng = np.random.default_rng(3)
    matrix = normalised(rng.standard_normal((500, 16)).astype(np.float32))
    query = rng.standard_normal(16).astype(np.float32)
    cosines = matrix @ (query / np.linalg.norm(query))
    assert numpy_top_k(matrix, query, 10) == [int(i) for i in np.argsort(-cosines)[:10]]


def test_numpy_top_k_with_k_above_the_rows_ranks_them_all() -> None:
    matrix = normalised(np.asarray([[1, 0], [0, 1], [1, 1]], dtype=np.float32))
    assert numpy_top_k(matrix, np.asarray([1, 0.1], dtype=np.float32), 5) == [0, 2, 1]


def test_normalised_scales_rows_to_unit_length_and_leaves_zero_rows() -> None:
    rows = normalised(np.asarray([[3, 4], [0, 0]], dtype=np.float32))
    assert rows.tolist() == [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]


def test_recall_at_k_is_the_share_of_the_exact_top_k_found() -> None:
    assert recall_at_k(["a", "b", "x"], ["a", "b", "c", "d"]) == 0.5
    assert recall_at_k([], []) == 1.0


def test_growth_figure_is_p95_at_the_largest_size_over_p95_at_the_smallest() -> None:
    small, large = SizeRun(1000), SizeRun(100000)
    for run, seconds in ((small, 0.001), (large, 0.003)):
        for side in run.seconds:
            run.seconds[side] = [seconds] * 4
    growth = [
        f for f in figures([small, large], quick=False) if f.benchmark.startswith("search growth")
    ]
    assert [round(f.ratio or 0, 6) for f in growth] == [3.0, 3.0, 3.0]
    assert all(f.met is False for f in growth)


def test_first_search_figures_are_against_warm_search_with_an_aim_at_1k_and_10k() -> None:
    runs = []
    for size in (1000, 10000, 100000):
        run = SizeRun(size)
        for side in run.seconds:
            run.seconds[side] = [0.010, 0.020, 0.030]
        run.first_search_s = [0.09, 0.03, 0.06]
        run.first_search_lists_s = [0.12] if size < 100000 else []
        run.first_search_parts_s = {"find": [0.045], "build": [0.015], "keywords": [0.006]}
        runs.append(run)
    rows = figures(runs, quick=False)
    ratios = [f for f in rows if f.benchmark == "search, first search / warm search"]
    assert [(f.ours, f.baseline, round(f.ratio or 0, 6)) for f in ratios] == [(60.0, 20.0, 3.0)] * 3
    assert [f.met for f in ratios] == [True, True, None]
    firsts = [
        f for f in rows if f.benchmark == "search, first search (index built from the database)"
    ]
    assert [f.baseline for f in firsts] == [0.12, 0.12, None]
    parts = [f for f in rows if f.benchmark.startswith("search, first search's part")]
    assert [round(f.ratio or 0, 6) for f in parts[:3]] == [0.75, 0.25, 0.1]
