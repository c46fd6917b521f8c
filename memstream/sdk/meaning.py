"""How close in meaning texts are to a query, through the query embedder, with the vectors of
texts seen recently kept in a bounded cache (docs/architecture.md, "Past messages").

`build_context` can rerank the past messages its keywords found by their similarity to the
query (`recalled_by_meaning`, `handlers.recall.reranked`; `memory.rerank_past_messages`): one
embedding call per query for the query and the candidates not already cached. Questions about
the same user share some candidates, whose vectors are then found in the cache (on
`bench.recall_meaning_cost`, 0.39 s a call against 0.57 s with nothing cached). The cache
holds at most `CACHED_VECTORS` vectors, keyed by a digest of the embedding model's name and
the text (never the text itself), so its size does not grow with the history and no message's
words are kept in it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from handlers.ports import Embedder
from handlers.recall import RERANK_POOL, PastMessage, keyword_candidates, meaning_text, reranked

CACHED_VECTORS = 4_096
"""Vectors kept at most (384 float32 each with the local embedder: 1.5 kB, 6 MB in all)."""

Vector = npt.NDArray[np.float32]


class VectorCache:
    """The latest `capacity` vectors used, the least recently used dropped first; thread-safe."""

    def __init__(self, capacity: int = CACHED_VECTORS) -> None:
        if capacity < 1:
            raise ValueError(f"a vector cache holds at least one vector, not {capacity}")
        self.capacity = capacity
        self._vectors: OrderedDict[bytes, Vector] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._vectors)

    def get(self, key: bytes) -> Vector | None:
        with self._lock:
            vector = self._vectors.get(key)
            if vector is not None:
                self._vectors.move_to_end(key)
            return vector

    def put(self, key: bytes, vector: Vector) -> None:
        with self._lock:
            self._vectors[key] = vector
            self._vectors.move_to_end(key)
            while len(self._vectors) > self.capacity:
                self._vectors.popitem(last=False)


def cache_key(model_name: str, text: str) -> bytes:
    """A digest of the model's name and the text: what a cached vector is found by."""
    return hashlib.blake2b(f"{model_name}\0{text}".encode(), digest_size=16).digest()


def embedded(embedder: Embedder, cache: VectorCache, texts: Sequence[str]) -> list[Vector]:
    """One vector per text, in order: from the cache, or embedded in one call for the texts not
    in it (each distinct text once), which are then cached."""
    keys = [cache_key(embedder.model_name, text) for text in texts]
    found: dict[bytes, Vector] = {}
    for key in keys:
        vector = cache.get(key)
        if vector is not None:
            found[key] = vector
    missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in found))
    if missing:
        vectors = embedder.embed(missing)
        if len(vectors) != len(missing):
            raise ValueError(f"the embedder gave {len(vectors)} vectors for {len(missing)} texts")
        for text, values in zip(missing, vectors, strict=True):
            key = cache_key(embedder.model_name, text)
            found[key] = np.asarray(values, dtype=np.float32)
            cache.put(key, found[key])
    return [found[key] for key in keys]


def similarity(
    embedder: Embedder, cache: VectorCache, query: str, texts: Sequence[str]
) -> list[float]:
    """Each text's cosine similarity to `query` (the embedder's vectors are L2-normalised)."""
    if not texts:
        return []
    query_vector, *vectors = embedded(embedder, cache, [query, *texts])
    return [float(np.dot(vector, query_vector)) for vector in vectors]


def recalled_by_meaning(
    embedder: Embedder,
    cache: VectorCache,
    query: str,
    messages: Sequence[PastMessage],
    limit: int,
) -> list[PastMessage]:
    """The at most `limit` of `messages` best for `query`: the best `RERANK_POOL` by keywords
    reranked by their meaning's similarity to it (`handlers.recall.reranked`)."""
    if limit <= 0:
        return []
    candidates = keyword_candidates(query, messages, RERANK_POOL)
    texts = [meaning_text(candidate.message) for candidate in candidates]
    return reranked(candidates, similarity(embedder, cache, query, texts), limit)
