"""The product's own search path, without Kafka or MongoDB.

* Memories are embedded as the extraction stage stores them (`streams.extraction`): one
  `embed(texts)` call for a batch of memory texts, each vector `rounded` to float32 precision.
  (The engine gives the same vector for a text alone or in a batch: checked, max difference 0.)
* Queries are embedded as `MemoryClient.search` embeds them: `embed([query])`, one text per call.
* Ranking is `ReadModel.search` itself — filters, `UserIndex.similarities`,
  `handlers.search.KeywordIndex` and `handlers.search.ranked` — on a read model whose only
  difference is where the user's `UserIndex` comes from (`InMemoryReadModel`), so the bench
  follows any change to the SDK's ranking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from handlers.ports import Embedder
from handlers.search import SearchMode
from handlers.vectors import rounded
from memstream.sdk.read_model import ReadModel
from memstream.sdk.search_index import UserIndex


class InMemoryReadModel(ReadModel):
    """`ReadModel.search` over indexes given up front (no MongoDB client is created)."""

    def __init__(self, indexes: Mapping[str, UserIndex]) -> None:  # no super(): no database
        self._indexes = dict(indexes)

    async def _user_index(self, user_id: str) -> UserIndex:
        return self._indexes[user_id]


def stored_vectors(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """The vectors the extraction stage would store for `texts`."""
    return [list(rounded(vector)) for vector in embedder.embed(list(texts))]


def query_vector(embedder: Embedder, query: str) -> list[float]:
    """The vector `MemoryClient.search` sends for `query`."""
    (vector,) = embedder.embed([query])
    return vector


async def ranked_ids(
    read_model: ReadModel,
    user_id: str,
    query: str,
    vector: Sequence[float],
    model: str,
    *,
    mode: SearchMode,
    limit: int,
) -> list[str]:
    """Memory ids in the order `ReadModel.search` returns them."""
    found = await read_model.search(user_id, query, vector, model, mode=mode, limit=limit)
    return [str(document["memory_id"]) for document in found]
