"""Ranking memories for a query: which memories qualify, how keywords score, how the vector and
keyword scores combine, computed fast on arrays (the plain definitions they equal are in
bench/search_eval/definitions.py).

Pure (docs/architecture.md, "Search"): the vector similarities come from the index the caller
uses (`memstream.sdk.search_index`); this module filters, scores the keywords and ranks.

* **Filters** (`Filters.matches`): memory types, agent, subject (case-insensitive), owner,
  category, and creation time between `since` and `until` (inclusive). A memory without a
  creation time never passes a time filter.
* **Keywords** are scored with BM25 (k1 = 1.2, b = 0.75) over the texts of the memories that
  pass the filters (`KeywordIndex.scores`). Tokens are lower-cased words of letters and digits;
  Chinese, which has no spaces, is split into single characters and their bigrams, so "咖啡"
  matches "喜欢咖啡" without a segmenter.
* **Hybrid** ranking (the default) is relative score fusion (`ranked`): VECTOR_WEIGHT *
  the cosine similarity min-max normalised over the candidates + (1 - VECTOR_WEIGHT) * BM25 /
  the best BM25, over every memory with a vector or a positive keyword score. Reciprocal rank
  fusion (RRF, k = 60), the previous default, made rank differences near the top almost
  worthless (1/61 against 1/65) while any shared token — "the", "user", "用户" — added a full
  1/(60 + rank): it ranked below vector search alone on the labelled set
  (bench/search_eval/RESULTS.md); the benchmarks keep it to compare against.
* **Languages**: the similarities ranked with (vector mode) and fused (hybrid) are the cosines
  with the embedding model's bias for a shared language taken off (`handlers.cross_lingual`):
  a multilingual embedder scores texts of the query's language higher whatever they say, which
  kept cross-lingual answers out of the top 5. The caller corrects them before
  `ranked`; `vector_score` stays the plain cosine.
* **Order**: descending score, ties by memory id; `limit` results at most.

**The fast path.** The definitions (bench/search_eval/definitions.py: `keyword_scores`,
`combine`) are written for reading: they tokenise every text and sort every candidate for every
query. The product ranks with `KeywordIndex` (texts tokenised once into postings when a user's
index is built; a query only touches the postings of its own tokens), `FilterColumns` (the
filters as boolean masks over columns built with the index) and `ranked` (scores as arrays; the
`limit` best found with `np.partition`, only they are sorted). These do the same float
operations in the same order — the BM25 sum over the query's tokens in the order of the same
`set`, the fusion term by term — so they return the same floats, not merely close ones; the
tests and the bench assert equality with the definitions, ids and scores, on random data and on
the labelled set.
"""

from __future__ import annotations

import math
import operator
import re
from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

SearchMode = Literal["hybrid", "vector", "keyword"]
Floats = NDArray[np.float64]
Mask = NDArray[np.bool_]
Positions = NDArray[np.int64]

BM25_K1 = 1.2
BM25_B = 0.75
VECTOR_WEIGHT = 0.9
"""The vector share of the hybrid score. Chosen on the labelled set it is then measured on
(bench/search_eval/RESULTS.md): among 0.5 to 1.0, 0.9 gave the best MRR (0.805, against 0.722 for
RRF and 0.800 for vector alone), within 0.01 of each user's own best weight; chosen on two users
and tested on the other two, see RESULTS.md, "Held-out check of the weight". Measured again with
the language correction (`handlers.cross_lingual`): 0.85 to 0.95 within 0.005 MRR, 0.9 still the
best held out (0.889). Keyword evidence is worth a tie-breaker, no more: the embedder already
matches words, and across languages keywords match nothing (cross-lingual keyword MRR 0.04)."""

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CJK_CHARS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK = re.compile(f"[{_CJK_CHARS}]")
_CJK_RUN_OR_OTHER = re.compile(f"([{_CJK_CHARS}]+)|(.)", re.DOTALL)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# -- the definitions ---------------------------------------------------------------------------


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
    """Each run of CJK characters: its characters, then its bigrams; any other character alone."""
    out: list[str] = []
    for run, other in _CJK_RUN_OR_OTHER.findall(word):
        if run:
            out.extend(run)
            out.extend(map(operator.add, run, run[1:]))
        else:
            out.append(other)
    return out


@dataclass(frozen=True)
class Filters:
    """Which memories a search considers (None or empty: no condition). Times compare as
    instants; a naive time is taken as UTC (as pymongo stores it)."""

    types: Collection[str] | None = None
    agent_id: str | None = None
    subject: str | None = None
    owner: str | None = None
    category: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def matches(self, document: Mapping[str, Any]) -> bool:
        created = document.get("created_at")
        return (
            (not self.types or document.get("memory_type") in self.types)
            and (self.agent_id is None or document.get("agent_id") == self.agent_id)
            and (
                self.subject is None
                or str(document.get("subject")).casefold() == self.subject.casefold()
            )
            and (self.owner is None or document.get("owner") == self.owner)
            and (self.category is None or document.get("category") == self.category)
            and (self.since is None or (created is not None and _utc(created) >= _utc(self.since)))
            and (self.until is None or (created is not None and _utc(created) <= _utc(self.until)))
        )


NO_FILTERS = Filters()


# -- the fast path -----------------------------------------------------------------------------


@dataclass(frozen=True)
class KeywordIndex:
    """BM25 postings of a fixed list of texts. The postings of the token numbered t are
    `positions[starts[t]:starts[t + 1]]` (ascending) with their term `frequencies`."""

    lengths: Floats
    """Tokens per text."""
    vocabulary: dict[str, int]
    starts: Positions
    positions: Positions
    frequencies: Floats

    @classmethod
    def built(cls, texts: Sequence[str]) -> KeywordIndex:
        vocabulary: dict[str, int] = {}
        token_ids: list[int] = []
        frequencies: list[int] = []
        positions: list[int] = []
        lengths: list[int] = []
        for position, text in enumerate(texts):
            counts = Counter(tokens(text))
            lengths.append(sum(counts.values()))
            token_ids.extend([vocabulary.setdefault(token, len(vocabulary)) for token in counts])
            frequencies.extend(counts.values())
            positions.extend([position] * len(counts))
        by_token = np.asarray(token_ids, dtype=np.int64)
        order = np.argsort(by_token, kind="stable")
        starts = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(np.bincount(by_token, minlength=len(vocabulary)), out=starts[1:])
        return cls(
            np.asarray(lengths, dtype=np.float64),
            vocabulary,
            starts,
            np.asarray(positions, dtype=np.int64)[order],
            np.asarray(frequencies, dtype=np.float64)[order],
        )

    def merged(self, kept: Mask, added: KeywordIndex) -> KeywordIndex:
        """The postings of the `kept` texts, in their order, then those of `added`'s: what
        `built` gives for those texts, but for the numbering of the tokens (tokens no text
        holds any more keep their number, with no postings). Only the added texts are
        tokenised; the rest is array work."""
        vocabulary = dict(self.vocabulary)
        renumbered = np.asarray(
            [vocabulary.setdefault(token, len(vocabulary)) for token in added.vocabulary],
            dtype=np.int64,
        )
        kept_postings = kept[self.positions]
        new_position = np.cumsum(kept) - 1
        by_token = np.concatenate(
            [
                np.repeat(np.arange(len(self.vocabulary)), np.diff(self.starts))[kept_postings],
                renumbered[np.repeat(np.arange(len(added.vocabulary)), np.diff(added.starts))],
            ]
        ).astype(np.int64)
        positions = np.concatenate(
            [new_position[self.positions[kept_postings]], added.positions + int(kept.sum())]
        ).astype(np.int64)
        frequencies = np.concatenate([self.frequencies[kept_postings], added.frequencies])
        order = np.argsort(by_token, kind="stable")  # positions stay ascending per token
        starts = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(np.bincount(by_token, minlength=len(vocabulary)), out=starts[1:])
        return KeywordIndex(
            np.concatenate([self.lengths[kept], added.lengths]),
            vocabulary,
            starts,
            positions[order],
            frequencies[order],
        )

    def scores(self, query: str, chosen: Mask) -> Floats:
        """The definition's `keyword_scores(query, the chosen texts)`, by position; 0 where
        not chosen."""
        scores = np.zeros(len(self.lengths), dtype=np.float64)
        query_tokens = set(tokens(query))
        count = int(chosen.sum())
        if not query_tokens or not count:
            return scores
        average = float(self.lengths[chosen].sum()) / count or 1.0
        for token in query_tokens:  # the same set, so the same order as the definition
            number = self.vocabulary.get(token)
            if number is None:
                continue
            start, end = self.starts[number], self.starts[number + 1]
            where, tf = self.positions[start:end], self.frequencies[start:end]
            keep = chosen[where]
            where, tf = where[keep], tf[keep]
            frequency = len(where)
            if not frequency:
                continue
            idf = math.log(1 + (count - frequency + 0.5) / (frequency + 0.5))
            norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * self.lengths[where] / average)
            scores[where] += idf * tf * (BM25_K1 + 1) / norm
        return scores


@dataclass(frozen=True)
class _Codes:
    """One field of every memory as small integers, for equality masks."""

    codes: NDArray[np.int32]
    by_value: dict[Hashable, int]

    @classmethod
    def of(cls, values: Iterable[Hashable]) -> _Codes:
        by_value: dict[Hashable, int] = {}
        codes = [by_value.setdefault(value, len(by_value)) for value in values]
        return cls(np.asarray(codes, dtype=np.int32), by_value)

    def merged(self, kept: Mask, added: _Codes) -> _Codes:
        """The `kept` codes, then `added`'s, renumbered into one set of values."""
        by_value = dict(self.by_value)
        renumbered = np.asarray(
            [by_value.setdefault(value, len(by_value)) for value in added.by_value],
            dtype=np.int32,
        )
        codes = np.concatenate([self.codes[kept], renumbered[added.codes]]).astype(np.int32)
        return _Codes(codes, by_value)

    def equal(self, value: Hashable) -> Mask:
        code = self.by_value.get(value)
        if code is None:
            return np.zeros(len(self.codes), dtype=np.bool_)
        found: Mask = self.codes == code
        return found

    def among(self, values: Iterable[Hashable]) -> Mask:
        wanted = [self.by_value[v] for v in values if v in self.by_value]
        found: Mask = np.isin(self.codes, np.asarray(wanted, dtype=np.int32))
        return found


@dataclass(frozen=True)
class FilterColumns:
    """The fields `Filters` reads, one column each, built once per index."""

    memory_type: _Codes
    agent_id: _Codes
    subject: _Codes
    """Case-folded, as `Filters.matches` compares it."""
    owner: _Codes
    category: _Codes
    created: NDArray[np.int64]
    """Microseconds since the epoch (naive times taken as UTC); meaningless where not `dated`."""
    dated: Mask

    @classmethod
    def built(cls, documents: Sequence[Mapping[str, Any]]) -> FilterColumns:
        times = [document.get("created_at") for document in documents]
        return cls(
            memory_type=_Codes.of(d.get("memory_type") for d in documents),
            agent_id=_Codes.of(d.get("agent_id") for d in documents),
            subject=_Codes.of(str(d.get("subject")).casefold() for d in documents),
            owner=_Codes.of(d.get("owner") for d in documents),
            category=_Codes.of(d.get("category") for d in documents),
            created=np.asarray([0 if t is None else _micros(t) for t in times], dtype=np.int64),
            dated=np.asarray([t is not None for t in times], dtype=np.bool_),
        )

    def merged(self, kept: Mask, added: FilterColumns) -> FilterColumns:
        """The columns of the `kept` memories, then `added`'s."""
        return FilterColumns(
            memory_type=self.memory_type.merged(kept, added.memory_type),
            agent_id=self.agent_id.merged(kept, added.agent_id),
            subject=self.subject.merged(kept, added.subject),
            owner=self.owner.merged(kept, added.owner),
            category=self.category.merged(kept, added.category),
            created=np.concatenate([self.created[kept], added.created]),
            dated=np.concatenate([self.dated[kept], added.dated]),
        )

    def mask(self, filters: Filters) -> Mask:
        """Where `filters.matches` holds."""
        kept: Mask = np.ones(len(self.dated), dtype=np.bool_)
        if filters.types:
            kept &= self.memory_type.among(filters.types)
        if filters.agent_id is not None:
            kept &= self.agent_id.equal(filters.agent_id)
        if filters.subject is not None:
            kept &= self.subject.equal(filters.subject.casefold())
        if filters.owner is not None:
            kept &= self.owner.equal(filters.owner)
        if filters.category is not None:
            kept &= self.category.equal(filters.category)
        if filters.since is not None:
            kept &= self.dated & (self.created >= _micros(filters.since))
        if filters.until is not None:
            kept &= self.dated & (self.created <= _micros(filters.until))
        return kept


def ranked(
    mode: SearchMode,
    similarity: Floats,
    with_vector: Mask,
    keyword: Floats,
    chosen: Mask,
    tie_order: Positions,
    limit: int,
    *,
    weight: float = VECTOR_WEIGHT,
) -> list[tuple[int, float]]:
    """The definition's `combine` on arrays by position: the best (position, score) pairs
    among `chosen`.

    `with_vector`: the chosen positions with a similarity; `keyword`: `KeywordIndex.scores`
    (0 outside `chosen`); `tie_order[p]`: the rank of p's memory id among all ids."""
    if mode == "vector":
        scores, kept = similarity, with_vector
    elif mode == "keyword":
        scores, kept = keyword, chosen & (keyword > 0.0)
    else:
        scores, kept = relative_fused_scores(similarity, with_vector, keyword, weight)
    return [(int(p), float(scores[p])) for p in _best(scores, kept, tie_order, limit)]


def relative_fused_scores(
    similarity: Floats, with_vector: Mask, keyword: Floats, weight: float
) -> tuple[Floats, Mask]:
    """The definition's `relative_fused`, term by term: the scores and which positions have one
    (also `handlers.recall.reranked`'s fusion)."""
    present = similarity[with_vector]
    low = float(present.min()) if len(present) else 0.0
    spread = ((float(present.max()) if len(present) else 0.0) - low) or 1.0
    best = (float(keyword.max()) if len(keyword) else 0.0) or 1.0
    normalised = np.where(with_vector, (similarity - low) / spread, 0.0)
    scores: Floats = weight * normalised + (1 - weight) * keyword / best
    return scores, with_vector | (keyword > 0.0)


def _best(scores: Floats, kept: Mask, tie_order: Positions, limit: int) -> Positions:
    """The kept positions with the `limit` best scores, best first, ties by `tie_order`.

    Only the kept positions scoring at least the `limit`-th best are sorted (`np.partition`
    finds that score in linear time)."""
    candidates = np.flatnonzero(kept)
    if limit <= 0 or not len(candidates):
        return candidates[:0]
    values = scores[candidates]
    if len(candidates) > limit:
        cut = len(candidates) - limit
        threshold = np.partition(values, cut)[cut]
        top = values >= threshold
        candidates, values = candidates[top], values[top]
    order = np.lexsort((tie_order[candidates], -values))
    best: Positions = candidates[order[:limit]]
    return best


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _micros(moment: datetime) -> int:
    return (_utc(moment) - _EPOCH) // timedelta(microseconds=1)
