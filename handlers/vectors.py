"""Embedding arithmetic every decision shares: float32 precision and an exact cosine.

Decisions compare vectors that came from different places (a decision in the log, the read
model's packed float32, a fresh embedding), so each side is taken at float32 precision first
and the sums are exact (`math.fsum`): the result depends neither on where a vector was read nor
on the order a vector library would add in (docs/architecture.md, "Replay"). Pure Python
(`array`), so a stage that only compares a few vectors does not load numpy.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

EMBEDDING_DIGITS = 7
"""Significant decimal digits kept of each component of a stored vector: float32 precision.
Halves the bytes of a result record (a 1,536-dimension vector is ~17 kB in JSON instead of
~30 kB) and loses nothing a float32 embedding model produced."""


def rounded(vector: Sequence[float]) -> tuple[float, ...]:
    """`vector` with `EMBEDDING_DIGITS` significant digits per component (how vectors are
    written into records)."""
    return tuple(float(f"{value:.{EMBEDDING_DIGITS}g}") for value in vector)


def cosine(left: Sequence[float], right: Sequence[float]) -> float:
    """Cosine similarity of the two vectors at float32 precision; 0 for vectors of different
    lengths, empty ones or zero vectors."""
    if len(left) != len(right) or not left:
        return 0.0
    a = array("f", left).tolist()
    b = array("f", right).tolist()
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return dot / norms if norms else 0.0
