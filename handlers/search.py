"""Ranking memories for a query: keyword scores, and the fusion of keyword and vector rankings.

Pure (docs/architecture.md, "Search"): the vector similarities come from the index the caller
uses (`memstream.search_index`, or MongoDB's `$vectorSearch`); this module scores the keywords
and fuses the two rankings.

* **Keywords** are scored with BM25 (k1 = 1.2, b = 0.75) over the candidate memories' texts.
  Tokens are lower-cased words of letters and digits; Chinese, which has no spaces, is split
  into single characters and their bigrams, so "咖啡" matches "喜欢咖啡" without a segmenter.
* **Hybrid** ranking is reciprocal rank fusion (RRF, k = 60): each memory scores
  Σ 1 / (k + rank) over the rankings it appears in. RRF needs no calibration between cosine
  similarities and BM25 scores, which live on unrelated scales.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Literal

SearchMode = Literal["hybrid", "vector", "keyword"]
RRF_K = 60
BM25_K1 = 1.2
BM25_B = 0.75

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; a run of CJK characters gives its characters and bigrams."""
    found: list[str] = []
    for word in _WORD.findall(text.casefold()):
        if _CJK.search(word):
            found.extend(_cjk_tokens(word))
        else:
            found.append(word)
    return found


def _cjk_tokens(word: str) -> list[str]:
    out: list[str] = []
    run = ""
    for char in [*word, " "]:
        if _CJK.match(char):
            run += char
            continue
        if run:
            out.extend(run)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
            run = ""
        if char != " ":
            out.append(char)
    return out


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


def combine(
    mode: SearchMode,
    vector: Mapping[str, float],
    keyword: Mapping[str, float],
    limit: int,
) -> list[tuple[str, float]]:
    """The `limit` best ids with their scores: by vector similarity, by keyword score (only
    memories that share a keyword), or fused."""
    if mode == "vector":
        order = ranking(vector)
        return [(i, vector[i]) for i in order[:limit]]
    if mode == "keyword":
        order = ranking(keyword, minimum=0.0)
        return [(i, keyword[i]) for i in order[:limit]]
    scores = fused([ranking(vector), ranking(keyword, minimum=0.0)])
    order = ranking(scores)
    return [(i, scores[i]) for i in order[:limit]]
