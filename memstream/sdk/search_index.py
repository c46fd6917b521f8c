"""The in-process index behind `search`: one user's current memories, ready to rank.

Why in-process (docs/architecture.md, "Search"): MongoDB's `$vectorSearch` needs Atlas (or an
Atlas-compatible deployment with a search node); a plain `mongod` and the embedded SecantusDB
answer it with an error. Search is always scoped to one user, so the index is per user: the
user's current memories, their vectors normalised in one float32 matrix per embedding model and
scored by one matrix-vector product — brute force, exact — beside what `handlers.search` ranks
with (keyword postings, filter columns, the id order), all built once per index.

**Cost** (bench/search_eval/RESULTS.md, BENCHMARKS.md "Search"): a search reads the whole
matrix, so its time grows linearly with the user's memories (100,000 * 384 float32 = 154 MB per
query). A build happens on a user's first search in a process, and after more changes than the
change feed keeps: `ReadModel` sends one query (the user's current memories, the fields below),
then `built` copies the vectors — stored packed, `projections.vectors` — into one float32 matrix
per model straight from their bytes (`unpack_matrix`, one copy), tokenises every text for the
keyword postings and builds the filter columns, in a thread. What a first search still costs
on SecantusDB (BENCHMARKS.md "Search": 92x a warm search at 1k memories, 281x at 10k, where
≤ 3x was aimed at): ~70% is the query — SecantusDB is a Python server that reads, decodes,
checks, projects (deep-copying each kept field) and re-encodes every document, one at a time —
and most of the rest the Python tokenising of every text in `built`. Packing the vectors made
the first search 0.4-0.5x of lists of doubles (384 floats to decode, copy and encode per
document, on both sides); what is left is per document, not per float.

**Freshness.** `ReadModel` reads the user's entry in `memory_writes` by `_id` before each search:
a write count, which the projector bumps after each memory event it applied, and the memory ids
of the last 1,000 of those events. When the count moved by no more than the ids kept, the index
is `updated` with those memories' current versions (fetched by id; only they are tokenised and
converted), otherwise rebuilt. A database projected before `memory_writes` existed has no entry:
there the count of the user's `memory_events` decides, as before (a scan: ~0.8 s per search at
10k memories on SecantusDB) and changes rebuild. Either signal changes after the memories did; a
crash between the two is repaired when the event is redelivered (until then search may miss that
one change).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from handlers.cross_lingual import LANGUAGES, corrected_array, language_of, same_language_bias
from handlers.search import (
    FilterColumns,
    Filters,
    Floats,
    KeywordIndex,
    Mask,
    Positions,
    SearchMode,
    ranked,
)
from memstream.sdk.results import Document, MemoryFields
from projections.vectors import dimension_of, unpack_matrix

Revision = int | str
"""A user's write count, or "events:<n>" when counted from `memory_events` (they never equal)."""
INDEXED_FIELDS = {
    **dict.fromkeys(sorted(MemoryFields.__required_keys__ - {"_id"}), 1),
    "embedding": 1,
}
"""What the index keeps of each current memory: what a search hit shows (`MemoryFields`), and
the vector."""


@dataclass(frozen=True)
class Hit:
    """One search result: the memory's position in `UserIndex.documents` and its scores."""

    position: int
    score: float
    vector_score: float | None
    """None when the memory has no vector of the query's model."""
    keyword_score: float


@dataclass(frozen=True)
class UserIndex:
    """One user's current memories: their documents (without vectors), vectors by model, and
    what `handlers.search` ranks with — keyword postings, filter columns, the id order."""

    revision: Revision
    documents: list[Document]
    matrices: dict[str, tuple[Positions, NDArray[np.float32]]]
    """Per embedding model: the positions of its memories and their normalised vectors."""
    keywords: KeywordIndex
    columns: FilterColumns
    tie_order: Positions
    """Rank of each position's memory id among the ids: equal scores rank by id."""
    languages: NDArray[np.int8]
    """Each position's text's language (`handlers.cross_lingual.language_of`), as its position
    in `handlers.cross_lingual.LANGUAGES`."""

    @classmethod
    def built(cls, revision: Revision, documents: Sequence[Mapping[str, Any]]) -> UserIndex:
        kept: list[Document] = []
        vectors: dict[str, tuple[list[int], list[object]]] = {}
        for document in documents:
            stored = document.get("embedding")
            kept.append({k: v for k, v in document.items() if k != "embedding"})
            if dimension_of(stored):
                model = str(document.get("embedding_model") or "")
                positions, rows = vectors.setdefault(model, ([], []))
                positions.append(len(kept) - 1)
                rows.append(stored)
        matrices = {}
        for model, (positions, rows) in vectors.items():
            matrix = unpack_matrix(rows)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            matrix /= np.where(norms == 0, 1, norms)
            matrices[model] = (np.asarray(positions, dtype=np.int64), matrix)
        return cls(
            revision,
            kept,
            matrices,
            KeywordIndex.built([str(document.get("text") or "") for document in kept]),
            FilterColumns.built(kept),
            _tie_order(kept),
            _languages(kept),
        )

    def updated(
        self, revision: Revision, changed: Collection[str], documents: Sequence[Mapping[str, Any]]
    ) -> UserIndex:
        """This index after the memories `changed` (ids) changed: their entries dropped, then
        `documents` — their current versions, if any — appended. Ranks as `built(revision,
        the same memories)` does (tests/memstream/sdk/test_search_index.py); only the appended
        documents are tokenised and converted."""
        kept: Mask = np.fromiter(
            (str(document.get("memory_id")) not in changed for document in self.documents),
            dtype=np.bool_,
            count=len(self.documents),
        )
        added = UserIndex.built(revision, documents)
        offset = int(kept.sum())
        new_position = np.cumsum(kept) - 1
        matrices: dict[str, tuple[Positions, NDArray[np.float32]]] = {}
        for model in [*self.matrices, *(m for m in added.matrices if m not in self.matrices)]:
            position_parts: list[Positions] = []
            row_parts: list[NDArray[np.float32]] = []
            if model in self.matrices:
                positions, matrix = self.matrices[model]
                rows = kept[positions]
                position_parts.append(new_position[positions[rows]])
                row_parts.append(matrix[rows])
            if model in added.matrices:
                positions, matrix = added.matrices[model]
                position_parts.append(positions + offset)
                row_parts.append(matrix)
            merged_positions = np.concatenate(position_parts).astype(np.int64)
            if len(merged_positions):
                matrices[model] = (merged_positions, np.concatenate(row_parts))
        documents_now = [d for d, keep in zip(self.documents, kept, strict=True) if keep]
        documents_now.extend(added.documents)
        return UserIndex(
            revision,
            documents_now,
            matrices,
            self.keywords.merged(kept, added.keywords),
            self.columns.merged(kept, added.columns),
            _tie_order(documents_now),
            np.concatenate([self.languages[kept], added.languages]),
        )

    def vector_scores(self, query: Sequence[float], model: str) -> tuple[Floats, Mask]:
        """Cosine similarity of each memory embedded by `model` to `query`, by position, and
        which positions have one (a query of another dimension matches none)."""
        scores = np.zeros(len(self.documents), dtype=np.float64)
        present = np.zeros(len(self.documents), dtype=np.bool_)
        if model not in self.matrices:
            return scores, present
        positions, matrix = self.matrices[model]
        vector = np.asarray(query, dtype=np.float32)
        if vector.shape != (matrix.shape[1],):
            return scores, present
        norm = float(np.linalg.norm(vector)) or 1.0
        # Row by row (einsum's own loop, not BLAS): a row's score then depends on that row
        # alone, so an index updated in place ranks exactly as one rebuilt from the same
        # memories. BLAS picks kernels by the matrix's shape, and on AVX-512 machines that
        # changed the last bits of a score, and the order of near-ties, between the two.
        scores[positions] = np.einsum("ij,j->i", matrix, vector / norm)
        present[positions] = True
        return scores, present

    def language_corrected(
        self, similarity: Floats, with_vector: Mask, query: str, model: str
    ) -> Floats:
        """`similarity` with `model`'s bias for the query's language taken off the candidates
        (`with_vector`) written in it (`handlers.cross_lingual`)."""
        language = language_of(query)
        bias = same_language_bias(model, language)
        if not bias:
            return similarity
        same = self.languages == LANGUAGES.index(language)
        return corrected_array(similarity, with_vector, same, bias)

    def search(
        self,
        query: str,
        vector: Sequence[float],
        model: str,
        *,
        mode: SearchMode,
        limit: int,
        filters: Filters,
    ) -> list[Hit]:
        """The `limit` best memories passing `filters` (`handlers.search.combine`, computed by
        `handlers.search.ranked`), ranked by the similarities with the shared language's bias
        taken off (`handlers.cross_lingual`); each hit's `vector_score` is the plain cosine."""
        chosen = self.columns.mask(filters)
        similarity, present = self.vector_scores(vector, model)
        with_vector = chosen & present
        keyword = self.keywords.scores(query, chosen)
        corrected = self.language_corrected(similarity, with_vector, query, model)
        return [
            Hit(
                position,
                score,
                float(similarity[position]) if with_vector[position] else None,
                float(keyword[position]),
            )
            for position, score in ranked(
                mode, corrected, with_vector, keyword, chosen, self.tie_order, limit
            )
        ]


def _languages(documents: Sequence[Mapping[str, Any]]) -> NDArray[np.int8]:
    """Each document's text's language, by its position in `LANGUAGES`."""
    code = {language: number for number, language in enumerate(LANGUAGES)}
    return np.asarray(
        [code[language_of(str(d.get("text") or ""))] for d in documents], dtype=np.int8
    )


def _tie_order(documents: Sequence[Mapping[str, Any]]) -> Positions:
    """Rank of each position's memory id among the ids."""
    ids = [str(document.get("memory_id")) for document in documents]
    tie_order = np.empty(len(ids), dtype=np.int64)
    tie_order[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    return tie_order


class SearchIndex:
    """The per-user indexes of one process, updated or rebuilt when a user's memories change."""

    def __init__(self) -> None:
        self._users: dict[str, UserIndex] = {}

    def latest(self, user_id: str) -> UserIndex | None:
        """The user's index, whatever its revision."""
        return self._users.get(user_id)

    def store(self, user_id: str, index: UserIndex) -> UserIndex:
        self._users[user_id] = index
        return index
