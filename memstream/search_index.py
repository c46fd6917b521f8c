"""The in-process vector index behind `search`: one user's current memories as a numpy matrix.

Why in-process (docs/architecture.md, "Search"): MongoDB's `$vectorSearch` needs Atlas (or an
Atlas-compatible deployment with a search node); a plain `mongod` and the embedded SecantusDB
answer it with an error (checked at first use, see `memstream.read_model`). Search is always
scoped to one user, so the index is per user: the user's current memories, their vectors
normalised in one float32 matrix, scored by one matrix-vector product (brute force — exact, and
measured in `bench/` at 1k, 10k and 100k memories per user).

**Freshness.** A user's index is rebuilt when the number of the user's entries in
`memory_events` changed since it was built. The projector appends an event's entry after it
changed the memories, so a changed count means changed memories; a crash between the two is
repaired when the event is redelivered (until then search may miss that one change).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

Document = dict[str, Any]
INDEXED_FIELDS = {
    "memory_id": 1,
    "version": 1,
    "status": 1,
    "memory_type": 1,
    "user_id": 1,
    "agent_id": 1,
    "subject": 1,
    "owner": 1,
    "text": 1,
    "category": 1,
    "attributes": 1,
    "reinforcement_count": 1,
    "created_at": 1,
    "updated_at": 1,
    "embedding": 1,
    "embedding_model": 1,
}


@dataclass
class UserIndex:
    """One user's current memories: their documents (without vectors) and vectors by model."""

    revision: int
    documents: list[Document]
    matrices: dict[str, tuple[list[int], NDArray[np.float32]]] = field(default_factory=dict)

    @classmethod
    def built(cls, revision: int, documents: Sequence[Mapping[str, Any]]) -> UserIndex:
        kept: list[Document] = []
        vectors: dict[str, list[tuple[int, list[float]]]] = {}
        for document in documents:
            embedding = document.get("embedding") or []
            row = {k: v for k, v in document.items() if k != "embedding"}
            kept.append(row)
            if embedding:
                model = str(document.get("embedding_model") or "")
                vectors.setdefault(model, []).append((len(kept) - 1, list(embedding)))
        index = cls(revision, kept)
        for model, rows in vectors.items():
            matrix = np.asarray([vector for _, vector in rows], dtype=np.float32)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            matrix /= np.where(norms == 0, 1, norms)
            index.matrices[model] = ([position for position, _ in rows], matrix)
        return index

    def similarities(self, query: Sequence[float], model: str) -> dict[int, float]:
        """Cosine similarity of each memory embedded by `model` to `query` (by position)."""
        positions, matrix = self.matrices.get(model, ([], np.zeros((0, 0), dtype=np.float32)))
        if not positions:
            return {}
        vector = np.asarray(query, dtype=np.float32)
        if vector.shape[0] != matrix.shape[1]:
            return {}
        norm = float(np.linalg.norm(vector)) or 1.0
        scores = matrix @ (vector / norm)
        return {position: float(score) for position, score in zip(positions, scores, strict=True)}


class SearchIndex:
    """The per-user indexes of one process, rebuilt when a user's memories change."""

    def __init__(self) -> None:
        self._users: dict[str, UserIndex] = {}

    def cached(self, user_id: str, revision: int) -> UserIndex | None:
        index = self._users.get(user_id)
        return index if index is not None and index.revision == revision else None

    def store(self, user_id: str, index: UserIndex) -> UserIndex:
        self._users[user_id] = index
        return index
