"""Search: `ReadModel.search` at 1k, 10k and 100k memories per user vs brute-force numpy.

    python -m bench search [--quick]        # quick: 1k and 3k; full: 1k, 10k, 100k

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

Also per size: the first search, `FIRSTS` times, each in a fresh `ReadModel` (a process's first
search for the user: one find of the user's current memories + `UserIndex.built`), against the
warm search of the same run (aim ≤ 3x at 1k and 10k) and, at the `lists` sizes, against the
same memories stored as lists of doubles in a database of their own (how every database was
projected before vectors were packed, `projections.vectors`; the two alternate); after each
packed first search, its parts timed alone (the find, the build, and the keyword postings
within the build); the search right after a memory is written (`WRITES` times: one
`MemoryAdded` through the projector, then one search, which updates the index with that memory
only — the first search is its baseline, as every search after a write was before the update
existed); and the recall@10 of `ReadModel.search`'s vector mode against numpy's exact top 10
(1.0 as long as search is exact). Growth: p95 at the largest size / p95 at 1k (aim ≤ 2).
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
from handlers.search import KeywordIndex
from memstream.sdk.read_model import ReadModel
from memstream.sdk.search_index import UserIndex
from projections.memories import project_memory_event, version_id
from projections.store import MEMORIES, MEMORY_EVENTS, MEMORY_WRITES, Db, ensure_indexes
from projections.vectors import unpack_matrix, unpack_vector
from projections.writes import LiveWrites

DIMENSION = 384
LIMIT = 10
SEED = 11
BATCH = 1000
SIDES = ("end_to_end", "ranking", "numpy")
COUNTED = "end_to_end_counting_events"
WRITES = 5
"""Memories added through the projector, each followed by one timed search."""
FIRSTS = 3
"""First searches timed per size and stored form, each in a fresh `ReadModel`."""
FIRST_AIM_SIZES = (1000, 10000)
"""Sizes at which the first search aims at ≤ 3x the warm search."""
PARTS = ("find", "build", "keywords")
"""A first search's parts: the read model's query, `UserIndex.built`, and within the build the
keyword postings (`KeywordIndex.built`)."""


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
    lists: tuple[int, ...]
    """Sizes also loaded with their vectors as lists of doubles, for the first search's
    baseline (not at 100k: minutes per first search)."""


QUICK = Profile(
    (1000, 3000),
    {1000: 30, 3000: 20},
    {1000: 30, 3000: 20},
    {1000: 5, 3000: 3},
    (1000, 3000),
)
"""CI's profile: every measurement once, at sizes that load in seconds (the figures at 10k and
100k, and their aims, come from the full profile)."""
FULL = Profile(
    (1000, 10000, 100000),
    {1000: 50, 10000: 50, 100000: 50},
    {1000: 50, 10000: 50, 100000: 50},
    {1000: 20, 10000: 10, 100000: 3},
    (1000, 10000),
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
    first_search_s: list[float] = field(default_factory=list)
    first_search_lists_s: list[float] = field(default_factory=list)
    """The same first search on the memories stored as lists of doubles."""
    first_search_parts_s: dict[str, list[float]] = field(
        default_factory=lambda: {part: [] for part in PARTS}
    )
    """The packed first search's parts, each timed alone after each first search: the find,
    the build, and the keyword postings (part of the build)."""
    after_write_s: list[float] = field(default_factory=list)
    load_s: float = 0.0
    recall: list[float] = field(default_factory=list)

    def ms(self, side: str, q: float) -> float:
        return percentile(self.seconds[side], q) * 1000

    @property
    def first_s(self) -> float:
        """The median first search (packed vectors)."""
        return percentile(self.first_search_s, 50)

    def summary(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "queries": {side: len(values) for side, values in self.seconds.items()},
            "load_s": self.load_s,
            "first_search_s": self.first_search_s,
            "first_search_lists_s": self.first_search_lists_s,
            "first_search_parts_s": self.first_search_parts_s,
            "search_after_a_write_s": self.after_write_s,
            "p50_ms": {side: self.ms(side, 50) for side in self.seconds if self.seconds[side]},
            "p95_ms": {side: self.ms(side, 95) for side in self.seconds if self.seconds[side]},
            "recall_at_10_vector_mode": float(np.mean(self.recall)) if self.recall else None,
            "seconds": self.seconds,
        }


def _load(uri: str, database: str, documents: list[dict[str, Any]], *, lists: bool) -> None:
    """The user's memories (their vectors packed, or as lists of doubles with `lists`) and one
    `memory_events` entry each (without the event payload the projector also stores there).
    The user's write count comes later (`_write_count`)."""
    client: MongoClient[dict[str, Any]]
    with MongoClient(uri) as client:
        db: Db = client[database]
        ensure_indexes(db)
        for start in range(0, len(documents), BATCH):
            chunk = documents[start : start + BATCH]
            db[MEMORIES].insert_many(
                [
                    {
                        "_id": version_id(d["memory_id"], d["version"]),
                        **d,
                        **({"embedding": list(unpack_vector(d["embedding"]))} if lists else {}),
                    }
                    for d in chunk
                ]
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
    lists: bool,
    vocabulary: Vocabulary,
) -> SizeRun:
    run = SizeRun(size)
    documents = synthetic_documents(size, DIMENSION, vocabulary, SEED + size)
    matrix = normalised(unpack_matrix([d["embedding"] for d in documents]))
    ids = [str(d["memory_id"]) for d in documents]
    user = str(documents[0]["user_id"])
    database = f"bench-search-{uuid.uuid4().hex[:8]}"
    databases = {"packed": database}
    started = time.perf_counter()
    await asyncio.to_thread(_load, uri, database, documents, lists=False)
    run.load_s = time.perf_counter() - started
    if lists:
        databases["lists"] = f"{database}-lists"
        await asyncio.to_thread(_load, uri, databases["lists"], documents, lists=True)
        await asyncio.to_thread(_write_count, uri, databases["lists"], user, size)
    del documents
    rng = np.random.default_rng(SEED + 1)
    vectors = normalised(rng.standard_normal((len(queries), DIMENSION)).astype(np.float32))
    read_model = ReadModel(uri, database)
    try:
        # No write count yet: this search builds the index and the next ones count the events.
        await read_model.search(user, queries[0], vectors[0].tolist(), MODEL, limit=LIMIT)
        for number in range(counted):
            started = time.perf_counter()
            await read_model.search(user, queries[number], vectors[number].tolist(), MODEL)
            run.seconds[COUNTED].append(time.perf_counter() - started)
        index = await read_model._user_index(user)
        await asyncio.to_thread(_write_count, uri, database, user, size)
        # The built index, labelled with the write count as if built under it (no second build).
        index = read_model._index.store(user, dataclasses.replace(index, revision=size))
        for number, baseline_first in alternate(FIRSTS):
            forms = ("lists", "packed") if baseline_first else ("packed", "lists")
            for form in (f for f in forms if f in databases):
                found = await _first_search(
                    uri, databases[form], user, queries[number], vectors[number]
                )
                (run.first_search_s if form == "packed" else run.first_search_lists_s).append(found)
                if form == "packed":
                    for part, seconds in (await _first_search_parts(read_model, user)).items():
                        run.first_search_parts_s[part].append(seconds)
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
            for name in databases.values():
                dropper.drop_database(name)
    return run


async def _first_search(
    uri: str, database: str, user: str, query: str, vector: NDArray[np.float32]
) -> float:
    """Seconds of the user's first search in a fresh read model (its connection opened first,
    by a profile read, so the figure is the index's build, not the handshake)."""
    read_model = ReadModel(uri, database)
    try:
        await read_model.profile(user)
        started = time.perf_counter()
        await read_model.search(user, query, vector.tolist(), MODEL, limit=LIMIT)
        return time.perf_counter() - started
    finally:
        await read_model.close()


async def _first_search_parts(read_model: ReadModel, user: str) -> dict[str, float]:
    """A first search's parts, each timed alone: the find the read model sends for a build,
    `UserIndex.built` over what it returned, and the keyword postings (part of the build)."""
    started = time.perf_counter()
    documents = await read_model._indexed_memories(user)
    found = time.perf_counter() - started
    started = time.perf_counter()
    index = UserIndex.built(0, documents)
    built = time.perf_counter() - started
    started = time.perf_counter()
    KeywordIndex.built([str(document.get("text") or "") for document in index.documents])
    return {"find": found, "build": built, "keywords": time.perf_counter() - started}


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
                size in profile.lists,
                vocabulary,
            )
        )
        print(
            f"   search {size}: end-to-end p50 {found.ms('end_to_end', 50):.2f} ms, "
            f"ranking p50 {found.ms('ranking', 50):.2f} ms, numpy p50 {found.ms('numpy', 50):.2f}"
            f" ms, first search {found.first_s:.2f} s",
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
        if found.first_search_s:
            rows.extend(_first_search_figures(found))
        if found.after_write_s and found.first_search_s:
            rows.append(
                Figure(
                    "search, first search after a memory is written",
                    setting,
                    "s",
                    percentile(found.after_write_s, 50),
                    found.first_s,
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
    span = f"p95 {large.size:,} / {small.size:,}" + (" (quick profile)" if quick else "")
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


def _first_search_figures(found: SizeRun) -> list[Figure]:
    """The first search against the warm one and against vectors stored as lists, and its
    parts as shares of it."""
    setting = f"{found.size:,} memories"
    first = found.first_s
    samples = f"median of {len(found.first_search_s)}, each in a fresh ReadModel"
    rows = [
        Figure(
            "search, first search (index built from the database)",
            setting,
            "s",
            first,
            percentile(found.first_search_lists_s, 50) if found.first_search_lists_s else None,
            "the same memories with their vectors as lists of doubles (as projected before)",
            note=f"{samples}: one find of the user's memories + UserIndex.built",
        ),
        Figure(
            "search, first search / warm search",
            setting,
            "ms",
            first * 1000,
            found.ms("end_to_end", 50),
            "warm search p50, ReadModel.search end to end (same run)",
            Aim("<=", 3) if found.size in FIRST_AIM_SIZES else None,
            note=samples,
        ),
    ]
    for part, name in zip(
        PARTS,
        (
            "the find (SecantusDB returning the memories)",
            "UserIndex.built",
            "the keyword postings (tokenising; part of the build)",
        ),
        strict=True,
    ):
        if found.first_search_parts_s[part]:
            rows.append(
                Figure(
                    f"search, first search's part: {name}",
                    setting,
                    "s",
                    percentile(found.first_search_parts_s[part], 50),
                    first,
                    "the whole first search (median)",
                    note=f"median of {len(found.first_search_parts_s[part])}, each timed alone "
                    "right after a first search",
                )
            )
    return rows


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["search", *sys.argv[1:]]))
