"""Search: `ReadModel.search` at 1k, 10k and 100k memories per user vs brute-force numpy.

    python -m bench search [--quick]        # quick: 1k and 10k only; full: 1k, 10k, 100k

One user per size, in a database of its own on the run's SecantusDB, holding synthetic current
memories (`bench.search_eval.scale.synthetic_documents`: random unit 384-d vectors, 70% English
and 30% Chinese texts from the labelled set's vocabulary) and one `memory_events` entry each, as
the projector leaves them. Queries: the labelled set's query texts, cycled, with random unit
vectors. For each query, alternating which side runs first:

* **ours, end to end**: `ReadModel.search(user, query, vector, model)` — the SDK's hybrid default,
  limit 10, as `MemoryClient.search` calls it (the query vector given, so the embedder is not
  timed) on a warm index: the freshness check (the user's write count, read by `_id`) plus the
  in-process ranking (docs/architecture.md, "Search").
* **ours, ranking only**: the same call on a read model whose index is handed over
  (`bench.search_eval.pipeline.InMemoryReadModel`): what the index costs without the database.
* **baseline**: brute-force numpy on the same vectors — the normalised float32 matrix @ the
  normalised query, `np.argpartition` for the top 10, then those 10 sorted.

Before those, per size, a few end-to-end searches the way they were before `memory_writes`
existed (`COUNTED`: no write count yet, so the read model counts the user's `memory_events`
before each search); then the write count is stored and the built index relabelled with it.

Also per size: the first search (the index built from the database: fetch + `UserIndex.built`);
the search right after a memory is written (`WRITES` times: one `MemoryAdded` through the
projector, then one search, which updates the index with that memory only — the first search
is its baseline, as every search after a write was before the update existed); and the
recall@10 of `ReadModel.search`'s vector mode against numpy's exact top 10 (1.0 as long as
search is exact). Growth: p95 at the largest size / p95 at 1k (aim ≤ 2).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pymongo import MongoClient

from bench.core import Aim, BenchContext, Figure, SuiteResult, alternate, percentile
from bench.search_eval.dataset import CREATED, load
from bench.search_eval.pipeline import InMemoryReadModel
from bench.search_eval.scale import MODEL, Vocabulary, synthetic_documents
from events.memories import Evidence, MemoryAdded, MemoryContent, Provenance
from memstream.read_model import ReadModel
from projections.memories import project_memory_event, version_id
from projections.store import MEMORIES, MEMORY_EVENTS, MEMORY_WRITES, Db, ensure_indexes
from projections.writes import LiveWrites

DIMENSION = 384
LIMIT = 10
SEED = 11
BATCH = 1000
SIDES = ("end_to_end", "ranking", "numpy")
COUNTED = "end_to_end_counting_events"
WRITES = 5
"""Memories added through the projector, each followed by one timed search."""


@dataclass(frozen=True)
class Profile:
    sizes: tuple[int, ...]
    queries: dict[int, int]
    """Queries timed per size (ranking only and numpy)."""
    end_to_end: dict[int, int]
    """Of which the first so many also end to end."""
    counted: dict[int, int]
    """Searches timed end to end the way it was before `memory_writes` existed (the user's
    `memory_events` counted before each search): seconds each at 100k, so only a few."""


QUICK = Profile((1000, 10000), {1000: 50, 10000: 30}, {1000: 50, 10000: 30}, {1000: 10, 10000: 4})
FULL = Profile(
    (1000, 10000, 100000),
    {1000: 50, 10000: 50, 100000: 50},
    {1000: 50, 10000: 50, 100000: 50},
    {1000: 20, 10000: 10, 100000: 3},
)


# -- the baseline and the pure helpers ---------------------------------------------------------


def normalised(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    """Rows scaled to unit length (zero rows left as they are)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32, copy=False)


def numpy_top_k(matrix: NDArray[np.float32], query: NDArray[np.float32], k: int) -> list[int]:
    """The baseline: rows of the normalised `matrix` by cosine to `query`, best first."""
    scores = matrix @ (query / (float(np.linalg.norm(query)) or 1.0))
    top = np.argpartition(-scores, k)[:k] if k < len(scores) else np.arange(len(scores))
    return [int(i) for i in top[np.argsort(-scores[top], kind="stable")]]


def recall_at_k(found: Sequence[str], exact: Sequence[str]) -> float:
    """Share of the exact top k that `found` holds (1.0 when `exact` is empty)."""
    if not exact:
        return 1.0
    return len(set(found) & set(exact)) / len(exact)


def growth(p95_large: float, p95_small: float) -> float:
    return p95_large / p95_small


# -- measuring ---------------------------------------------------------------------------------


@dataclass
class SizeRun:
    size: int
    seconds: dict[str, list[float]] = field(
        default_factory=lambda: {s: [] for s in (*SIDES, COUNTED)}
    )
    first_search_s: float = 0.0
    after_write_s: list[float] = field(default_factory=list)
    load_s: float = 0.0
    recall: list[float] = field(default_factory=list)

    def ms(self, side: str, q: float) -> float:
        return percentile(self.seconds[side], q) * 1000

    def summary(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "queries": {side: len(values) for side, values in self.seconds.items()},
            "load_s": self.load_s,
            "first_search_s": self.first_search_s,
            "search_after_a_write_s": self.after_write_s,
            "p50_ms": {side: self.ms(side, 50) for side in self.seconds if self.seconds[side]},
            "p95_ms": {side: self.ms(side, 95) for side in self.seconds if self.seconds[side]},
            "recall_at_10_vector_mode": float(np.mean(self.recall)) if self.recall else None,
            "seconds": self.seconds,
        }


def _load(uri: str, database: str, documents: list[dict[str, Any]]) -> None:
    """The user's memories and one `memory_events` entry each (without the event payload the
    projector also stores there). The user's write count comes later (`_write_count`)."""
    client: MongoClient[dict[str, Any]]
    with MongoClient(uri) as client:
        db: Db = client[database]
        ensure_indexes(db)
        for start in range(0, len(documents), BATCH):
            chunk = documents[start : start + BATCH]
            db[MEMORIES].insert_many(
                [{"_id": version_id(d["memory_id"], d["version"]), **d} for d in chunk]
            )
            db[MEMORY_EVENTS].insert_many(
                [
                    {
                        "_id": f"event-{d['memory_id']}",
                        "event_type": "MemoryAdded",
                        "memory_id": d["memory_id"],
                        "memory_type": d["memory_type"],
                        "user_id": d["user_id"],
                        "occurred_at": CREATED,
                    }
                    for d in chunk
                ]
            )


async def _measure(
    size: int,
    uri: str,
    queries: Sequence[str],
    end_to_end: int,
    counted: int,
    vocabulary: Vocabulary,
) -> SizeRun:
    run = SizeRun(size)
    documents = synthetic_documents(size, DIMENSION, vocabulary, SEED + size)
    matrix = normalised(np.asarray([d["embedding"] for d in documents], dtype=np.float32))
    ids = [str(d["memory_id"]) for d in documents]
    user = str(documents[0]["user_id"])
    database = f"bench-search-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    await asyncio.to_thread(_load, uri, database, documents)
    run.load_s = time.perf_counter() - started
    del documents
    rng = np.random.default_rng(SEED + 1)
    vectors = normalised(rng.standard_normal((len(queries), DIMENSION)).astype(np.float32))
    read_model = ReadModel(uri, database)
    try:
        started = time.perf_counter()
        await read_model.search(user, queries[0], vectors[0].tolist(), MODEL, limit=LIMIT)
        run.first_search_s = time.perf_counter() - started
        for number in range(counted):  # no write count yet: the events are counted
            started = time.perf_counter()
            await read_model.search(user, queries[number], vectors[number].tolist(), MODEL)
            run.seconds[COUNTED].append(time.perf_counter() - started)
        index = await read_model._user_index(user)
        await asyncio.to_thread(_write_count, uri, database, user, size)
        # The built index, labelled with the write count as if built under it (no second build).
        index = read_model._index.store(user, dataclasses.replace(index, revision=size))
        in_memory = InMemoryReadModel({user: index})
        for number, baseline_first in alternate(len(queries)):
            query, vector = queries[number], vectors[number]
            as_list = vector.tolist()
            order = ("numpy", "end_to_end", "ranking")
            for side in order if baseline_first else tuple(reversed(order)):
                if side == "end_to_end" and number >= end_to_end:
                    continue
                started = time.perf_counter()
                if side == "numpy":
                    numpy_top_k(matrix, vector, LIMIT)
                elif side == "end_to_end":
                    await read_model.search(user, query, as_list, MODEL, limit=LIMIT)
                else:
                    await in_memory.search(user, query, as_list, MODEL, limit=LIMIT)
                run.seconds[side].append(time.perf_counter() - started)
            run.recall.append(await _vector_recall(in_memory, user, query, vector, matrix, ids))
        for number in range(WRITES):
            event = _added(user, f"written-{number}", vectors[number % len(vectors)].tolist())
            await asyncio.to_thread(_project, uri, database, event)
            started = time.perf_counter()
            await read_model.search(user, queries[0], vectors[0].tolist(), MODEL, limit=LIMIT)
            run.after_write_s.append(time.perf_counter() - started)
    finally:
        await read_model.close()
        dropper: MongoClient[dict[str, Any]]
        with MongoClient(uri) as dropper:
            dropper.drop_database(database)
    return run


def _write_count(uri: str, database: str, user: str, count: int) -> None:
    """The user's entry in `memory_writes`, as the projector leaves it after `count` events."""
    client: MongoClient[dict[str, Any]]
    with MongoClient(uri) as client:
        db: Db = client[database]
        db[MEMORY_WRITES].insert_one({"_id": user, "count": count, "changed": []})


def _added(user: str, memory_id: str, vector: list[float]) -> MemoryAdded:
    return MemoryAdded(
        event_id=f"added-{memory_id}",
        occurred_at=CREATED,
        memory_id=memory_id,
        memory_type="semantic",
        user_id=user,
        content=MemoryContent(subject="the user", owner="user", text="The user likes jazz."),
        embedding=tuple(vector),
        evidence=Evidence(source="extraction", observed_at=CREATED),
        provenance=Provenance(embedding_model=MODEL, embedding_dimensions=DIMENSION),
    )


def _project(uri: str, database: str, event: MemoryAdded) -> None:
    """One memory event through the projector, as the pipeline writes it."""
    client: MongoClient[dict[str, Any]]
    with MongoClient(uri, tz_aware=True) as client:
        project_memory_event(LiveWrites(client[database]), event)


async def _vector_recall(
    in_memory: InMemoryReadModel,
    user: str,
    query: str,
    vector: NDArray[np.float32],
    matrix: NDArray[np.float32],
    ids: Sequence[str],
) -> float:
    """Recall@10 of `ReadModel.search`'s vector mode against numpy's exact top 10."""
    found = await in_memory.search(user, query, vector.tolist(), MODEL, mode="vector", limit=LIMIT)
    exact = [ids[i] for i in numpy_top_k(matrix, vector, LIMIT)]
    return recall_at_k([str(d["memory_id"]) for d in found], exact)


def run(context: BenchContext) -> SuiteResult:
    profile = QUICK if context.quick else FULL
    data = load()
    vocabulary = Vocabulary.of(data)
    texts = [q.text for q in data.queries]
    uri = context.mongo().uri
    runs: list[SizeRun] = []
    for size in profile.sizes:
        queries = [texts[i % len(texts)] for i in range(profile.queries[size])]
        found = asyncio.run(
            _measure(
                size,
                uri,
                queries,
                profile.end_to_end[size],
                profile.counted[size],
                vocabulary,
            )
        )
        print(
            f"   search {size}: end-to-end p50 {found.ms('end_to_end', 50):.2f} ms, "
            f"ranking p50 {found.ms('ranking', 50):.2f} ms, numpy p50 {found.ms('numpy', 50):.2f}"
            f" ms, first search {found.first_search_s:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        runs.append(found)
    return SuiteResult(figures(runs, quick=context.quick), {"sizes": [r.summary() for r in runs]})


def figures(runs: Sequence[SizeRun], *, quick: bool) -> list[Figure]:
    rows: list[Figure] = []
    baseline = "brute-force numpy (matrix @ query, argpartition top 10), same queries"
    for found in runs:
        setting = f"{found.size:,} memories"
        for q in (50, 95):
            rows.append(
                Figure(
                    f"search p{q}, ReadModel.search (hybrid, end to end)",
                    setting,
                    "ms",
                    found.ms("end_to_end", q),
                    found.ms("numpy", q),
                    baseline,
                    note="warm index; includes the freshness check (one read by _id)",
                )
            )
            rows.append(
                Figure(
                    f"search p{q}, in-process ranking (hybrid)",
                    setting,
                    "ms",
                    found.ms("ranking", q),
                    found.ms("numpy", q),
                    baseline,
                    note="ReadModel.search over the warm index, no database",
                )
            )
        if found.seconds[COUNTED]:
            rows.append(
                Figure(
                    "search p50, ReadModel.search end to end, counting memory_events (before)",
                    setting,
                    "ms",
                    found.ms(COUNTED, 50),
                    found.ms("end_to_end", 50),
                    "ReadModel.search end to end with the write count (now)",
                    note=f"{len(found.seconds[COUNTED])} searches; a database without "
                    "memory_writes still takes this path",
                )
            )
        rows.append(
            Figure(
                "search, first search (index built from the database)",
                setting,
                "s",
                found.first_search_s,
                note="fetch of the user's memories + UserIndex.built",
            )
        )
        if found.after_write_s:
            rows.append(
                Figure(
                    "search, first search after a memory is written",
                    setting,
                    "s",
                    percentile(found.after_write_s, 50),
                    found.first_search_s,
                    "the first search (index built from the database)",
                    note=f"median of {len(found.after_write_s)}: one MemoryAdded projected, "
                    "then one search (index updated with the changed memory)",
                )
            )
        if found.recall:
            rows.append(
                Figure(
                    "search recall@10 (vector mode vs exact numpy top 10)",
                    setting,
                    "share",
                    float(np.mean(found.recall)),
                )
            )
    small, large = runs[0], runs[-1]
    span = f"p95 {large.size:,} / {small.size:,}" + (" (quick: no 100k)" if quick else "")
    for side, name in (
        ("end_to_end", "ReadModel.search end to end"),
        ("ranking", "in-process ranking"),
        ("numpy", "numpy brute force"),
    ):
        rows.append(
            Figure(
                f"search growth, {name}",
                span,
                "ms",
                large.ms(side, 95),
                small.ms(side, 95),
                f"its own p95 at {small.size:,}",
                Aim("<=", 2),
            )
        )
    return rows


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["search", *sys.argv[1:]]))
