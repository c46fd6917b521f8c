"""Search ranking by its plain definitions: what `handlers.search` computes fast on arrays.

`keyword_scores` (BM25 over the texts given), `relative_fused` (the hybrid score), `fused`
(reciprocal rank fusion, the previous default, kept to compare against) and `combine` (the best
ids of a mode) are written for reading: they tokenise every text and sort every candidate. The
product's `KeywordIndex`, `FilterColumns` and `ranked` must return the same ids and the same
floats (`tests/handlers/test_search.py`, `bench/search_eval/run.py`); the benchmarks rank with
these to try other fusions and weights.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Literal

from handlers.search import BM25_B, BM25_K1, VECTOR_WEIGHT, SearchMode, tokens

Fusion = Literal["relative", "rrf"]
RRF_K = 60


def keyword_scores(query: str, texts: Sequence[str]) -> list[float]:
    """BM25 score of each text for `query` (0 for a text sharing no token with it)."""
    query_tokens = set(tokens(query))
    documents = [Counter(tokens(text)) for text in texts]
    if not query_tokens or not documents:
        return [0.0] * len(texts)
    average = sum(sum(d.values()) for d in documents) / len(documents) or 1.0
    frequency = {t: sum(1 for d in documents if t in d) for t in query_tokens}
    count = len(documents)
    scores = []
    for document in documents:
        length = sum(document.values())
        score = 0.0
        for token in query_tokens:
            tf = document.get(token, 0)
            if not tf:
                continue
            idf = math.log(1 + (count - frequency[token] + 0.5) / (frequency[token] + 0.5))
            norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * length / average)
            score += idf * tf * (BM25_K1 + 1) / norm
        scores.append(score)
    return scores


def ranking(scores: Mapping[str, float], *, minimum: float | None = None) -> list[str]:
    """Ids ordered by descending score (ties by id), keeping scores above `minimum`."""
    kept = [(i, s) for i, s in scores.items() if minimum is None or s > minimum]
    return [i for i, _ in sorted(kept, key=lambda item: (-item[1], item[0]))]


def fused(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal rank fusion of several rankings: id → Σ 1 / (k + rank), ranks from 1."""
    scores: dict[str, float] = {}
    for ordered in rankings:
        for rank, item in enumerate(ordered, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return scores


def relative_fused(
    vector: Mapping[str, float], keyword: Mapping[str, float], weight: float = VECTOR_WEIGHT
) -> dict[str, float]:
    """id → `weight` * min-max-normalised similarity + (1 - `weight`) * BM25 / best BM25, for
    every id with a vector or a positive keyword score (no vector counts as the lowest
    similarity; one similarity, or all equal, normalise to 0)."""
    low = min(vector.values(), default=0.0)
    spread = (max(vector.values(), default=0.0) - low) or 1.0
    best = max(keyword.values(), default=0.0) or 1.0
    ids = set(vector) | {i for i, s in keyword.items() if s > 0.0}
    return {
        i: weight * ((vector[i] - low) / spread if i in vector else 0.0)
        + (1 - weight) * keyword.get(i, 0.0) / best
        for i in ids
    }


def combine(
    mode: SearchMode,
    vector: Mapping[str, float],
    keyword: Mapping[str, float],
    limit: int,
    *,
    fusion: Fusion = "relative",
    weight: float = VECTOR_WEIGHT,
) -> list[tuple[str, float]]:
    """The `limit` best ids with their scores: by vector similarity, by keyword score (only
    memories that share a keyword), or both fused. `vector` holds the candidates that have a
    vector, `keyword` every candidate."""
    if mode == "vector":
        scores = dict(vector)
    elif mode == "keyword":
        scores = {i: s for i, s in keyword.items() if s > 0.0}
    elif fusion == "rrf":
        scores = fused([ranking(vector), ranking(keyword, minimum=0.0)])
    else:
        scores = relative_fused(vector, keyword, weight)
    return [(i, scores[i]) for i in ranking(scores)[: max(limit, 0)]]
