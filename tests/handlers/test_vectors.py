"""Embedding arithmetic the decisions share (`handlers.vectors`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from handlers.vectors import cosine, rounded


def test_cosine_of_equal_orthogonal_and_opposite_vectors() -> None:
    assert cosine((1.0, 0.0), (2.0, 0.0)) == pytest.approx(1.0)
    assert cosine((1.0, 0.0), (0.0, 3.0)) == 0.0
    assert cosine((1.0, 1.0), (-1.0, -1.0)) == pytest.approx(-1.0)


def test_cosine_is_zero_for_zero_empty_or_mismatched_vectors() -> None:
    assert cosine((0.0, 0.0), (1.0, 0.0)) == 0.0
    assert cosine((), ()) == 0.0
    assert cosine((1.0,), (1.0, 0.0)) == 0.0


def test_a_vector_compares_the_same_from_the_log_and_from_the_read_model() -> None:
    """The log carries seven significant digits, the read model packed float32: the same
    vector either way, so a decision never depends on which one the stage read."""
    rng = np.random.default_rng(3)
    new = rounded(rng.normal(size=384).tolist())
    logged = rounded(rng.normal(size=384).tolist())
    stored = tuple(float(v) for v in np.asarray(logged, dtype=np.float32))
    assert logged != stored
    assert cosine(new, logged) == cosine(new, stored)


def test_cosine_equals_numpys_float32_exact_sum_bit_for_bit() -> None:
    """What reconciliation computed before this module (numpy's float32 cast, exact sums): the
    pure-Python cast rounds the same way, so no decision threshold moved."""
    rng = np.random.default_rng(7)
    for _ in range(50):
        left, right = rng.normal(size=384).tolist(), rng.normal(size=384).tolist()
        a = np.asarray(left, dtype=np.float32).astype(np.float64)
        b = np.asarray(right, dtype=np.float32).astype(np.float64)
        dot = math.fsum((a * b).tolist())
        norms = math.sqrt(math.fsum((a * a).tolist())) * math.sqrt(math.fsum((b * b).tolist()))
        assert cosine(left, right) == dot / norms


def test_rounded_keeps_float32_precision() -> None:
    assert rounded([0.123456789, -1e-9, 1.0]) == (0.1234568, -1e-9, 1.0)
