"""A proposed exact fast path for `ReadModel.search`, measured beside the SDK's (not used by it).

Where the SDK's search spends its time at 100k memories (`scale.py`): `keyword_scores`
tokenises and counts every text for every query in pure Python; then `similarities` turns the
score vector into a dict of 100k Python floats, `ReadModel.search` builds three more dicts of
100k string keys, and `combine` sorts 100k items in Python, twice for hybrid. This module does
the same ranking with the per-query work in numpy:

* **Keywords**: texts are tokenised once, when the index is built (`KeywordIndex`), into
  postings (token → positions and term frequencies) and lengths. A query touches only the
  postings of its own tokens. The corpus statistics (count, average length, document
  frequency) are taken over the *chosen* memories, as `keyword_scores` does over the texts it is
  given, so filtered searches score exactly as before.
* **Ranking**: the orders of `handlers.search.ranking` (descending score, ties by id, ids being
  the positions as strings) and the reciprocal-rank fusion of `handlers.search.fused` are
  computed with stable numpy sorts over arrays.

The arithmetic is the same, operation by operation and in the same order (the BM25 sum goes
over the query's tokens in the order of the same `set`), so the results are the same floats;
`run.py` checks that every ranking and score equals the SDK's.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from handlers.search import BM25_B, BM25_K1, RRF_K, SearchMode, tokens
from memstream.search_index import UserIndex

Floats = NDArray[np.float64]
Mask = NDArray[np.bool_]
Positions = NDArray[np.int64]


@dataclass(frozen=True)
class KeywordIndex:
    """BM25 postings of a fixed list of texts."""

    lengths: Floats
    postings: dict[str, tuple[Positions, Floats]]

    @classmethod
    def built(cls, texts: Sequence[str]) -> KeywordIndex:
        positions: dict[str, list[int]] = {}
        frequencies: dict[str, list[int]] = {}
        lengths = []
        for position, text in enumerate(texts):
            counts = Counter(tokens(text))
            lengths.append(sum(counts.values()))
            for token, count in counts.items():
                positions.setdefault(token, []).append(position)
                frequencies.setdefault(token, []).append(count)
        postings = {
            token: (np.asarray(where, dtype=np.int64), np.asarray(frequencies[token], np.float64))
            for token, where in positions.items()
        }
        return cls(np.asarray(lengths, dtype=np.float64), postings)

    def scores(self, query: str, chosen: Mask, *, common_share: float | None = None) -> Floats:
        """`keyword_scores(query, chosen texts)`, by position (0 where not chosen).

        With `common_share`, a query token found in more than that share of the chosen texts
        is ignored (see `COMMON_SHARE`)."""
        scores = np.zeros(len(self.lengths), dtype=np.float64)
        query_tokens = set(tokens(query))
        count = int(chosen.sum())
        if not query_tokens or not count:
            return scores
        average = float(self.lengths[chosen].sum()) / count or 1.0
        for token in query_tokens:
            where, tf = self.postings.get(token, (_NO_POSITIONS, _NO_FLOATS))
            keep = chosen[where]
            where, tf = where[keep], tf[keep]
            frequency = len(where)
            if not frequency or (common_share is not None and frequency > common_share * count):
                continue
            idf = math.log(1 + (count - frequency + 0.5) / (frequency + 0.5))
            norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * self.lengths[where] / average)
            scores[where] += idf * tf * (BM25_K1 + 1) / norm
        return scores


COMMON_SHARE = 0.5
"""The proposed cut for keyword matching: a token in more than half of the memories says
nothing about which one answers. Classic BM25's idf, log((N - n + 0.5) / (n + 0.5)), is
negative beyond that point and is usually clamped to 0; `handlers.search` uses the always-positive
log(1 + …) variant, so "the", "user" and "用户" make nearly every memory a keyword match. In a
ranking that is all reciprocal-rank fusion sees, and those matches push same-language
distractors above the answer found by the vector ranking (see RESULTS.md)."""

_NO_POSITIONS: Positions = np.zeros(0, dtype=np.int64)
_NO_FLOATS: Floats = np.zeros(0, dtype=np.float64)


@dataclass(frozen=True)
class FastIndex:
    """A `UserIndex` with its keyword postings and the id order of its positions."""

    index: UserIndex
    keywords: KeywordIndex
    by_id: Positions
    """All positions in the order of their ids, str(position): `ranking`'s tie order."""
    rows: dict[str, Positions]
    """Per embedding model, the positions of its matrix's rows."""

    @classmethod
    def built(cls, index: UserIndex) -> FastIndex:
        by_id = np.asarray(sorted(range(len(index.documents)), key=str), dtype=np.int64)
        texts = [str(document["text"]) for document in index.documents]
        rows = {
            model: np.asarray(positions, dtype=np.int64)
            for model, (positions, _) in index.matrices.items()
        }
        return cls(index, KeywordIndex.built(texts), by_id, rows)

    def vector_scores(self, query: Sequence[float], model: str) -> tuple[Floats, Mask]:
        """`UserIndex.similarities` as an array by position, and which positions have one."""
        count = len(self.index.documents)
        scores = np.zeros(count, dtype=np.float64)
        present = np.zeros(count, dtype=np.bool_)
        positions = self.rows.get(model, _NO_POSITIONS)
        vector = np.asarray(query, dtype=np.float32)
        if not len(positions):
            return scores, present
        matrix = self.index.matrices[model][1]
        if vector.shape[0] != matrix.shape[1]:
            return scores, present
        norm = float(np.linalg.norm(vector)) or 1.0
        scores[positions] = matrix @ (vector / norm)
        present[positions] = True
        return scores, present

    def search(
        self,
        query: str,
        vector: Sequence[float],
        model: str,
        *,
        mode: SearchMode,
        limit: int,
        chosen: Mask | None = None,
        common_share: float | None = None,
    ) -> list[tuple[int, float]]:
        """`combine(mode, vector, keyword, limit)` as `ReadModel.search` calls it: the best
        (position, score) pairs among the `chosen` positions (default: all)."""
        if chosen is None:
            chosen = np.ones(len(self.index.documents), dtype=np.bool_)
        similarity, present = self.vector_scores(vector, model)
        keyword = self.keywords.scores(query, chosen, common_share=common_share)
        if mode == "vector":
            top = self._ranking(similarity, self._best(similarity, chosen & present, limit))
            return [(int(p), float(similarity[p])) for p in top[:limit]]
        if mode == "keyword":
            top = self._ranking(keyword, self._best(keyword, chosen & (keyword > 0.0), limit))
            return [(int(p), float(keyword[p])) for p in top[:limit]]
        by_vector = self._ranking(similarity, chosen & present)
        by_keyword = self._ranking(keyword, chosen & (keyword > 0.0))
        fused = np.zeros(len(similarity), dtype=np.float64)
        fused[by_vector] += 1.0 / (RRF_K + np.arange(1, len(by_vector) + 1))
        fused[by_keyword] += 1.0 / (RRF_K + np.arange(1, len(by_keyword) + 1))
        ranked = np.zeros(len(similarity), dtype=np.bool_)
        ranked[by_vector] = True
        ranked[by_keyword] = True
        order = self._ranking(fused, self._best(fused, ranked, limit))
        return [(int(p), float(fused[p])) for p in order[:limit]]

    @staticmethod
    def _best(scores: Floats, kept: Mask, limit: int) -> Mask:
        """The kept positions scoring at least the `limit`-th best kept score (ties included):
        a superset of the top `limit` that needs no full sort."""
        candidates = scores[kept]
        if len(candidates) <= limit:
            return kept
        threshold = float(np.partition(candidates, len(candidates) - limit)[-limit])
        best: Mask = kept & (scores >= threshold)
        return best

    def _ranking(self, scores: Floats, kept: Mask) -> Positions:
        """Kept positions by descending score, ties by id (`handlers.search.ranking`): a stable
        sort of the kept positions taken in id order."""
        positions = self.by_id[kept[self.by_id]]
        return positions[np.argsort(-scores[positions], kind="stable")]
