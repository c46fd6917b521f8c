"""The search suite's pure helpers: the numpy baseline, recall@k, and the growth figure."""

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
