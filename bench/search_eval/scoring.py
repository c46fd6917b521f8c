"""Scores of a search ranking against labelled answers (pure: no I/O, no models).

For one query with the set A of labelled answers and a ranking R (best first; a memory the mode
does not rank at all — keyword mode without a shared token — is simply absent):

* recall@k — |A ∩ R[:k]| / |A|: the share of the answers in the first k results. A query with
  three answers, two of them in the top 5, has recall@5 = 2/3.
* reciprocal rank — 1 / (the position of the first answer in R), positions from 1; 0 when no
  answer is ranked. MRR is its mean over queries.

Every figure is a mean over queries (each query weighs the same, whatever its number of answers).
Percentiles interpolate linearly between the closest ranks (numpy's default), so the p95 of 20
values lies between the 19th and the 20th smallest.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass


def recall_at(ranked: Sequence[str], answers: Collection[str], k: int) -> float:
    """The share of `answers` among the first `k` of `ranked`."""
    if not answers:
        raise ValueError("a labelled query needs at least one answer")
    return len(set(ranked[:k]) & set(answers)) / len(set(answers))


def reciprocal_rank(ranked: Sequence[str], answers: Collection[str]) -> float:
    """1 / position of the first answer in `ranked` (from 1), 0 if none is ranked."""
    for position, item in enumerate(ranked, start=1):
        if item in answers:
            return 1.0 / position
    return 0.0


def first_rank(ranked: Sequence[str], answers: Collection[str]) -> int | None:
    """Position (from 1) of the first answer in `ranked`, None if none is ranked."""
    for position, item in enumerate(ranked, start=1):
        if item in answers:
            return position
    return None


@dataclass(frozen=True)
class Scores:
    """Mean scores over `queries` queries."""

    queries: int
    recall_at_1: float
    recall_at_5: float
    mrr: float


def scores(rankings: Iterable[tuple[Sequence[str], Collection[str]]]) -> Scores:
    """Mean recall@1, recall@5 and MRR of (ranking, answers) pairs (zeros for none)."""
    r1: list[float] = []
    r5: list[float] = []
    rr: list[float] = []
    for ranked, answers in rankings:
        r1.append(recall_at(ranked, answers, 1))
        r5.append(recall_at(ranked, answers, 5))
        rr.append(reciprocal_rank(ranked, answers))
    if not rr:
        return Scores(0, 0.0, 0.0, 0.0)
    return Scores(len(rr), _mean(r1), _mean(r5), _mean(rr))


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) with linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0-100, got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table, columns padded to their widest cell; the first column left-aligned,
    the others right-aligned."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        padded = [
            f"{cell:<{widths[i]}}" if i == 0 else f"{cell:>{widths[i]}}"
            for i, cell in enumerate(cells)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join(f"{'-' * (w + 1)}:" if i else f"{'-' * (w + 2)}" for i, w in enumerate(widths))
        + "|"
    )
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)
