"""Search quality on the labelled set: every query ranked by every ranker, scored by group.

A *ranker* is a named way to rank: the SDK's three modes (`ReadModel.search`), and comparisons
computed by the definitions (`reference.reference_search`): vector and hybrid without the
correction for a shared language (`handlers.cross_lingual`; the SDK before it), hybrid by
reciprocal rank fusion, hybrid with other vector weights. Each query is ranked over *all* of
its user's current memories (`limit` = the size of the store), so MRR sees the full ranking;
recall@1 and recall@5 only look at the top. The ranking latency is the time of one call (index
in memory, so no database time), the query-embedding latency that of one `embed([query])` call.

Groups: all queries; by query language (en, zh); cross-lingual (no answer in the query's
language) and same-language; by memory type of the answers (a query whose answers have two types
counts in both); by user.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.search_eval.dataset import LabelledSet, documents
from bench.search_eval.definitions import Fusion
from bench.search_eval.pipeline import InMemoryReadModel, query_vector, ranked_ids, stored_vectors
from bench.search_eval.reference import reference_search
from bench.search_eval.scoring import Scores, first_rank, percentile, scores
from events.memories import MEMORY_TYPES
from handlers.ports import Embedder
from handlers.rendering import Language
from handlers.search import VECTOR_WEIGHT, SearchMode
from memstream.sdk.search_index import UserIndex

MODES: tuple[SearchMode, ...] = ("vector", "keyword", "hybrid")
RRF = "hybrid (RRF)"
"""The default before relative score fusion, ranked by the definitions with `fusion="rrf"` and,
as it was then, no language correction."""
UNCORRECTED: dict[str, SearchMode] = {
    "vector, no language correction": "vector",
    "hybrid, no language correction": "hybrid",
}
"""The SDK before `handlers.cross_lingual`: ranked by the definitions with no language bias."""

Searcher = Callable[[str, str, Sequence[float], int], Awaitable[list[str]]]
"""(user_id, query, query vector, limit) → ranked memory ids."""


@dataclass(frozen=True)
class QueryRun:
    """One query ranked by one ranker."""

    query_id: str
    ranker: str
    ranked: tuple[str, ...]
    answers: tuple[str, ...]
    seconds: float

    @property
    def answer_ranks(self) -> dict[str, int | None]:
        return {a: first_rank(self.ranked, [a]) for a in self.answers}


@dataclass
class QualityReport:
    """Every query's rankings."""

    runs: list[QueryRun] = field(default_factory=list)

    def rankers(self) -> list[str]:
        return list(dict.fromkeys(run.ranker for run in self.runs))

    def scores(self, ranker: str, query_ids: set[str] | None = None) -> Scores:
        return scores(
            (run.ranked, run.answers)
            for run in self.runs
            if run.ranker == ranker and (query_ids is None or run.query_id in query_ids)
        )

    def latency(self, ranker: str) -> dict[str, float]:
        """p50 and p95 of the ranking time, in milliseconds."""
        values = [run.seconds * 1000 for run in self.runs if run.ranker == ranker]
        return {"p50": percentile(values, 50), "p95": percentile(values, 95)}


@dataclass(frozen=True)
class QueryVectors:
    """Every query's vector, as `MemoryClient.search` embeds it, and the time each took."""

    vectors: dict[str, list[float]]
    seconds: list[float]

    @classmethod
    def embedded(cls, data: LabelledSet, embedder: Embedder) -> QueryVectors:
        vectors: dict[str, list[float]] = {}
        seconds = []
        for query in data.queries:
            started = time.perf_counter()
            vectors[query.id] = query_vector(embedder, query.text)
            seconds.append(time.perf_counter() - started)
        return cls(vectors, seconds)


def groups(data: LabelledSet) -> dict[str, set[str]]:
    """Query ids per reported group, in reporting order (empty groups left out)."""
    found: dict[str, set[str]] = {"all": {q.id for q in data.queries}}
    for language in ("en", "zh"):
        found[f"query in {language}"] = {q.id for q in data.queries if q.language == language}
    cross = {q.id for q in data.queries if data.is_cross_lingual(q)}
    found["cross-lingual"] = cross
    found["same language"] = found["all"] - cross
    for language in ("en", "zh"):
        found[f"cross-lingual, query in {language}"] = {
            q.id for q in data.queries if q.id in cross and q.language == language
        }
    for memory_type in MEMORY_TYPES:
        found[f"answer {memory_type}"] = {
            q.id for q in data.queries if memory_type in data.answer_types(q)
        }
    for user in data.users:
        found[f"user {user.user_id}"] = {q.id for q in data.queries if q.user_id == user.user_id}
    return {name: ids for name, ids in found.items() if ids}


def sdk_indexes(
    data: LabelledSet, memory_embedder: Embedder, model_name: str
) -> dict[str, UserIndex]:
    """Each user's `UserIndex`, built from the documents the read model would hold."""
    indexes = {}
    for user in data.users:
        vectors = stored_vectors(memory_embedder, [m.text for m in user.memories])
        indexes[user.user_id] = UserIndex.built(1, documents(user, vectors, model_name))
    return indexes


def sdk_searcher(indexes: dict[str, UserIndex], model_name: str, mode: SearchMode) -> Searcher:
    """`ReadModel.search` over `indexes` in `mode`."""
    read_model = InMemoryReadModel(indexes)

    async def search(user_id: str, query: str, vector: Sequence[float], limit: int) -> list[str]:
        return await ranked_ids(
            read_model, user_id, query, vector, model_name, mode=mode, limit=limit
        )

    return search


def reference_searcher(
    indexes: dict[str, UserIndex],
    model_name: str,
    *,
    mode: SearchMode = "hybrid",
    fusion: Fusion = "relative",
    weight: float = VECTOR_WEIGHT,
    language_bias: Mapping[Language, float] | None = None,
) -> Searcher:
    """Ranking by the definitions (hybrid unless `mode` says otherwise), with another fusion,
    weight or language bias (`{}`: none)."""

    async def search(user_id: str, query: str, vector: Sequence[float], limit: int) -> list[str]:
        found = reference_search(
            indexes[user_id],
            query,
            vector,
            model_name,
            mode=mode,
            limit=limit,
            fusion=fusion,
            weight=weight,
            language_bias=language_bias,
        )
        return [result.memory_id for result in found]

    return search


def evaluate(
    data: LabelledSet, vectors: QueryVectors, searchers: Mapping[str, Searcher]
) -> QualityReport:
    """Rank every query with every searcher (timed)."""
    report = QualityReport()
    sizes = {user.user_id: len(user.memories) for user in data.users}

    async def rank_all() -> None:
        for ranker, searcher in searchers.items():
            for query in data.queries:
                vector = vectors.vectors[query.id]
                started = time.perf_counter()
                ranked = await searcher(query.user_id, query.text, vector, sizes[query.user_id])
                seconds = time.perf_counter() - started
                report.runs.append(
                    QueryRun(query.id, ranker, tuple(ranked), query.answers, seconds)
                )

    asyncio.run(rank_all())
    return report


async def equal_to_reference(
    data: LabelledSet, indexes: dict[str, UserIndex], vectors: QueryVectors, model_name: str
) -> dict[str, Any]:
    """Whether `ReadModel.search` returns exactly what the definitions return — ids, `score`,
    `vector_score`, `keyword_score`, full rankings — for every query in every mode."""
    read_model = InMemoryReadModel(indexes)
    compared, differing = 0, []
    for mode in MODES:
        for query in data.queries:
            vector = vectors.vectors[query.id]
            limit = len(indexes[query.user_id].documents)
            found = await read_model.search(
                query.user_id, query.text, vector, model_name, mode=mode, limit=limit
            )
            expected = reference_search(
                indexes[query.user_id], query.text, vector, model_name, mode=mode, limit=limit
            )
            got = [
                (d["memory_id"], d["score"], d["vector_score"], d["keyword_score"]) for d in found
            ]
            want = [(r.memory_id, r.score, r.vector_score, r.keyword_score) for r in expected]
            compared += 1
            if got != want:
                differing.append({"query": query.id, "mode": mode})
    return {
        "rankings_compared": compared,
        "rankings_equal": compared - len(differing),
        "differing": differing,
    }


def summary(
    report: QualityReport, named_groups: Mapping[str, set[str]], rankers: Sequence[str]
) -> dict[str, dict[str, dict[str, float]]]:
    """group → ranker → recall@1, recall@5, MRR, queries."""
    return {
        name: {ranker: vars(report.scores(ranker, ids)) for ranker in rankers}
        for name, ids in named_groups.items()
    }


def runs_json(data: LabelledSet, report: QualityReport) -> list[dict[str, Any]]:
    """Every query's ranking by every ranker, with the rank of each labelled answer."""
    by_id = {q.id: q for q in data.queries}
    return [
        {
            "id": run.query_id,
            "ranker": run.ranker,
            "user_id": by_id[run.query_id].user_id,
            "text": by_id[run.query_id].text,
            "language": by_id[run.query_id].language,
            "cross_lingual": data.is_cross_lingual(by_id[run.query_id]),
            "answers": list(run.answers),
            "answer_ranks": run.answer_ranks,
            "ranked": list(run.ranked),
            "ms": round(run.seconds * 1000, 3),
        }
        for run in report.runs
    ]
