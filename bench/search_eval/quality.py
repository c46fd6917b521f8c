"""Search quality on the labelled set: every query ranked in every mode, scored by group.

Each query is ranked over *all* of its user's current memories (`limit` = the size of the
store), so MRR sees the full ranking; recall@1 and recall@5 only look at the top. The ranking
latency is the time of one `ReadModel.search` call (index in memory, so no database time), the
query-embedding latency that of one `embed([query])` call.

Groups: all queries; by query language (en, zh); cross-lingual (no answer in the query's
language) and same-language; by memory type of the answers (a query whose answers have two types
counts in both).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.search_eval.dataset import MEMORY_TYPES, LabelledSet, Query, documents
from bench.search_eval.pipeline import InMemoryReadModel, query_vector, ranked_ids, stored_vectors
from bench.search_eval.scoring import Scores, first_rank, percentile, scores
from handlers.ports import Embedder
from handlers.search import SearchMode
from memstream.search_index import UserIndex

MODES: tuple[SearchMode, ...] = ("vector", "keyword", "hybrid")

Searcher = Callable[[str, str, Sequence[float], SearchMode, int], Awaitable[list[str]]]
"""(user_id, query, query vector, mode, limit) → ranked memory ids."""


@dataclass(frozen=True)
class QueryRun:
    """One query ranked in one mode."""

    query_id: str
    mode: SearchMode
    ranked: tuple[str, ...]
    answers: tuple[str, ...]
    seconds: float

    @property
    def answer_ranks(self) -> dict[str, int | None]:
        return {a: first_rank(self.ranked, [a]) for a in self.answers}


@dataclass
class QualityReport:
    """Every query's rankings, and the time to embed each query."""

    runs: list[QueryRun] = field(default_factory=list)
    embed_seconds: list[float] = field(default_factory=list)

    def scores(self, mode: SearchMode, query_ids: set[str] | None = None) -> Scores:
        return scores(
            (run.ranked, run.answers)
            for run in self.runs
            if run.mode == mode and (query_ids is None or run.query_id in query_ids)
        )

    def latency(self, mode: SearchMode) -> tuple[float, float]:
        """p50 and p95 of the ranking time in `mode`, in milliseconds."""
        values = [run.seconds * 1000 for run in self.runs if run.mode == mode]
        return percentile(values, 50), percentile(values, 95)


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


def sdk_searcher(indexes: dict[str, UserIndex], model_name: str) -> Searcher:
    """`ReadModel.search` over `indexes`."""
    read_model = InMemoryReadModel(indexes)

    async def search(
        user_id: str, query: str, vector: Sequence[float], mode: SearchMode, limit: int
    ) -> list[str]:
        return await ranked_ids(
            read_model, user_id, query, vector, model_name, mode=mode, limit=limit
        )

    return search


def evaluate(
    data: LabelledSet,
    query_embedder: Embedder,
    searcher: Searcher,
    *,
    modes: Sequence[SearchMode] = MODES,
) -> QualityReport:
    """Embed every query (timed) and rank it in every mode (timed)."""
    report = QualityReport()
    vectors: dict[str, list[float]] = {}
    for query in data.queries:
        started = time.perf_counter()
        vectors[query.id] = query_vector(query_embedder, query.text)
        report.embed_seconds.append(time.perf_counter() - started)
    sizes = {user.user_id: len(user.memories) for user in data.users}
    asyncio.run(_rank_all(data.queries, vectors, sizes, searcher, modes, report))
    return report


async def _rank_all(
    queries: Sequence[Query],
    vectors: dict[str, list[float]],
    sizes: dict[str, int],
    searcher: Searcher,
    modes: Sequence[SearchMode],
    report: QualityReport,
) -> None:
    for mode in modes:
        for query in queries:
            started = time.perf_counter()
            ranked = await searcher(
                query.user_id, query.text, vectors[query.id], mode, sizes[query.user_id]
            )
            seconds = time.perf_counter() - started
            report.runs.append(QueryRun(query.id, mode, tuple(ranked), query.answers, seconds))


def score_rows(
    report: QualityReport, named_groups: dict[str, set[str]], modes: Sequence[SearchMode] = MODES
) -> list[list[str]]:
    """Table rows: group, queries, then recall@1 / recall@5 / MRR for each mode."""
    rows = []
    for name, ids in named_groups.items():
        row = [name, str(len(ids))]
        for mode in modes:
            s = report.scores(mode, ids)
            row += [f"{s.recall_at_1:.2f}", f"{s.recall_at_5:.2f}", f"{s.mrr:.3f}"]
        rows.append(row)
    return rows


def score_header(modes: Sequence[SearchMode] = MODES) -> list[str]:
    header = ["queries", "n"]
    for mode in modes:
        header += [f"{mode} R@1", f"{mode} R@5", f"{mode} MRR"]
    return header


def report_json(
    data: LabelledSet, report: QualityReport, named_groups: dict[str, set[str]]
) -> dict[str, Any]:
    """Summary per group and mode, latencies, and every query's ranked ids and hits."""
    by_id = {q.id: q for q in data.queries}
    return {
        "summary": {
            name: {mode: vars(report.scores(mode, ids)) for mode in MODES if _has(report, mode)}
            for name, ids in named_groups.items()
        },
        "ranking_ms": {
            mode: dict(zip(("p50", "p95"), report.latency(mode), strict=True))
            for mode in MODES
            if _has(report, mode)
        },
        "query_embedding_ms": {
            "p50": percentile([s * 1000 for s in report.embed_seconds], 50),
            "p95": percentile([s * 1000 for s in report.embed_seconds], 95),
        },
        "queries": [
            {
                "id": run.query_id,
                "mode": run.mode,
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
        ],
    }


def _has(report: QualityReport, mode: SearchMode) -> bool:
    return any(run.mode == mode for run in report.runs)
