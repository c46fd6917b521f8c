"""Search latency as one user's index grows: synthetic memories at 1k, 10k, 100k.

Each size gets `n` synthetic current memories: random unit vectors of the embedder's dimension
(packed, as the projector stores them: `projections.vectors`), the four memory types in turn,
and short texts — 70% English, "The user" and 6-14 words drawn from the labelled set's English
vocabulary; 30% Chinese, "用户" and 8-20 characters drawn from its Chinese characters — so
keyword scoring sees realistic token counts. Queries are the labelled queries' texts (cycled)
with random unit vectors.

Timed per size:

* **build** — `UserIndex.built(revision, documents)` on documents already in memory (the
  MongoDB fetch is not included): the vector matrix, the keyword postings, the filter columns
  and the id order. Of which keywords: `KeywordIndex.built` over the same texts, timed once.
* **search** — one `ReadModel.search(limit=10)` call per query, in each mode, and in hybrid
  mode (the default) with a filter on the memory type (a quarter of the memories pass).
* **steps** of the unfiltered hybrid search, each timed on its own: the filter mask, the
  similarities (`UserIndex.vector_scores`: one matrix-vector product), their correction for
  the query's language (`UserIndex.language_corrected`), the keyword scores
  (`KeywordIndex.scores`) and the ranking (`handlers.search.ranked`).
* **the definitions** — for the first `checked` queries, unfiltered and filtered hybrid
  searches by `reference.reference_search` (every text tokenised, every candidate sorted in
  Python: what the SDK did before the fast path), timed, and their top 10 — ids, scores,
  vector and keyword scores — compared with `ReadModel.search`'s.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.search_eval.dataset import CREATED, LabelledSet
from bench.search_eval.pipeline import InMemoryReadModel
from bench.search_eval.reference import Result, reference_search
from bench.search_eval.scoring import percentile
from events.memories import MEMORY_TYPES, MemoryType
from handlers.cross_lingual import LOCAL_MODEL
from handlers.search import Filters, KeywordIndex, SearchMode, ranked
from memstream.sdk.search_index import UserIndex
from projections.vectors import pack_vector

USER = "scale-user"
MODEL = "synthetic"
"""The synthetic memories' model by default (`bench search` ranks them against numpy's exact
cosine top 10, so it wants no language correction)."""
TIMED_MODEL = LOCAL_MODEL
"""The model the scale measurement names: the local model's, so that its language correction
(`handlers.cross_lingual`) is part of every timed search, as in the product."""
LIMIT = 10
ONE_TYPE: tuple[MemoryType, ...] = ("semantic",)
SEARCHES: dict[str, tuple[SearchMode, tuple[MemoryType, ...]]] = {
    "vector": ("vector", ()),
    "keyword": ("keyword", ()),
    "hybrid": ("hybrid", ()),
    "hybrid, one type": ("hybrid", ONE_TYPE),
}
"""Name → mode and the memory types searched (none: all)."""
STEPS = ("mask", "vector_scores", "language_corrected", "keyword_scores", "ranked")
CHECKED = ("hybrid", "hybrid, one type")
"""The searches also run by the definitions (the baseline: what the SDK did before the fast
path), on the first `checked` queries."""


@dataclass(frozen=True)
class Vocabulary:
    words: tuple[str, ...]
    characters: tuple[str, ...]

    @classmethod
    def of(cls, data: LabelledSet) -> Vocabulary:
        texts = [m.text for u in data.users for m in u.memories]
        words = sorted({w for t in texts for w in re.findall(r"[A-Za-z]{3,}", t)})
        characters = sorted({c for t in texts for c in t if "\u4e00" <= c <= "\u9fff"})
        return cls(tuple(words), tuple(characters))

    def text(self, rng: random.Random) -> str:
        if rng.random() < 0.7:
            return "The user " + " ".join(rng.choices(self.words, k=rng.randint(6, 14))) + "."
        return "用户" + "".join(rng.choices(self.characters, k=rng.randint(8, 20))) + "。"


def synthetic_documents(
    n: int, dimension: int, vocabulary: Vocabulary, seed: int, model: str = MODEL
) -> list[dict[str, Any]]:
    """`n` current memories of one user, shaped like the read model's documents."""
    rng = random.Random(seed)
    vectors = np.random.default_rng(seed).standard_normal((n, dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [
        {
            "memory_id": f"m{i:06d}",
            "version": 1,
            "status": "current",
            "memory_type": MEMORY_TYPES[i % len(MEMORY_TYPES)],
            "user_id": USER,
            "agent_id": None,
            "subject": "the user",
            "owner": "user",
            "text": vocabulary.text(rng),
            "category": None,
            "attributes": {},
            "reinforcement_count": 0,
            "created_at": CREATED,
            "updated_at": CREATED,
            "embedding": pack_vector(vector),
            "embedding_model": model,
        }
        for i, vector in enumerate(vectors)
    ]


@dataclass
class SizeReport:
    """Timings (seconds) at one index size."""

    size: int
    build: list[float] = field(default_factory=list)
    keyword_build: list[float] = field(default_factory=list)
    search: dict[str, list[float]] = field(default_factory=lambda: {n: [] for n in SEARCHES})
    steps: dict[str, list[float]] = field(default_factory=lambda: {n: [] for n in STEPS})
    reference: dict[str, list[float]] = field(default_factory=lambda: {n: [] for n in CHECKED})
    differing: list[dict[str, Any]] = field(default_factory=list)
    """The checked searches whose top 10 differs from the definitions'."""

    def summary(self) -> dict[str, Any]:
        timed = self.reference_times
        return {
            "size": self.size,
            "queries": len(self.search["hybrid"]),
            "build_ms": _runs(self.build),
            "keyword_build_ms": _runs(self.keyword_build),
            "search_ms": {name: _ms(values) for name, values in self.search.items()},
            "steps_ms": {name: _ms(values) for name, values in self.steps.items()},
            "reference": {
                "searches": len(timed),
                "ms": _ms(timed),
                "by_search": {
                    name: _against(values, self.search[name][: len(values)])
                    for name, values in self.reference.items()
                },
                "equal_top10": len(timed) - len(self.differing),
                "differing": self.differing,
            },
        }

    @property
    def reference_times(self) -> list[float]:
        return [value for values in self.reference.values() for value in values]


def _ms(values: Sequence[float]) -> dict[str, float]:
    scaled = [v * 1000 for v in values]
    return {"p50": percentile(scaled, 50), "p95": percentile(scaled, 95)}


def _against(reference: Sequence[float], sdk: Sequence[float]) -> dict[str, Any]:
    """The definitions against `ReadModel.search` on the same queries: both times and the ratio
    of their medians (how many times faster the SDK is than the baseline)."""
    found: dict[str, Any] = {"ms": _ms(reference), "sdk_ms": _ms(sdk)}
    if reference and sdk:
        found["ratio_p50"] = percentile(reference, 50) / percentile(sdk, 50)
    return found


def _runs(values: Sequence[float]) -> dict[str, Any]:
    scaled = [v * 1000 for v in values]
    return {"median": percentile(scaled, 50), "runs": scaled}


def measure(
    size: int,
    *,
    dimension: int,
    vocabulary: Vocabulary,
    queries: Sequence[str],
    builds: int,
    checked: int,
    seed: int,
    progress: Callable[[str], None] = lambda _: None,
) -> SizeReport:
    """Build the index `builds` times and time every query in `queries` against it."""
    report = SizeReport(size)
    documents = synthetic_documents(size, dimension, vocabulary, seed, TIMED_MODEL)
    index = UserIndex.built(1, documents)
    for _ in range(builds):
        started = time.perf_counter()
        index = UserIndex.built(1, documents)
        report.build.append(time.perf_counter() - started)
    del documents
    texts = [str(document["text"]) for document in index.documents]
    started = time.perf_counter()
    KeywordIndex.built(texts)
    report.keyword_build.append(time.perf_counter() - started)
    progress(f"{size}: built in {percentile(report.build, 50) * 1000:.0f} ms (median)")
    rng = np.random.default_rng(seed + 1)
    vectors = rng.standard_normal((len(queries), dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    pairs = list(zip(queries, vectors.tolist(), strict=True))
    found = asyncio.run(_search_all(index, pairs, report))
    for query, vector in pairs:
        _time_steps(index, query, vector, report)
    for number, (query, vector) in enumerate(pairs[:checked]):
        for name in CHECKED:
            mode, types = SEARCHES[name]
            started = time.perf_counter()
            expected = reference_search(
                index,
                query,
                vector,
                TIMED_MODEL,
                mode=mode,
                limit=LIMIT,
                filters=Filters(types=types),
            )
            report.reference[name].append(time.perf_counter() - started)
            if found[name][number] != expected:
                report.differing.append({"query": number, "search": name})
    hybrid = report.search["hybrid"]
    compared = len(report.reference_times)
    progress(
        f"{size}: hybrid p50 {percentile(hybrid, 50) * 1000:.2f} ms, "
        f"p95 {percentile(hybrid, 95) * 1000:.2f} ms; "
        f"{compared - len(report.differing)}/{compared} equal to the definitions"
    )
    return report


async def _search_all(
    index: UserIndex, pairs: Sequence[tuple[str, list[float]]], report: SizeReport
) -> dict[str, list[list[Result]]]:
    """Every search's top 10, per kind of search."""
    read_model = InMemoryReadModel({USER: index})
    found: dict[str, list[list[Result]]] = {name: [] for name in SEARCHES}
    for name, (mode, types) in SEARCHES.items():
        for query, vector in pairs:
            started = time.perf_counter()
            top = await read_model.search(
                USER,
                query,
                vector,
                TIMED_MODEL,
                mode=mode,
                limit=LIMIT,
                filters=Filters(types=types),
            )
            report.search[name].append(time.perf_counter() - started)
            found[name].append(
                [
                    Result(d["memory_id"], d["score"], d["vector_score"], d["keyword_score"])
                    for d in top
                ]
            )
    return found


def _time_steps(index: UserIndex, query: str, vector: list[float], report: SizeReport) -> None:
    """The unfiltered hybrid search's steps, each timed alone."""
    started = time.perf_counter()
    chosen = index.columns.mask(Filters())
    report.steps["mask"].append(time.perf_counter() - started)
    started = time.perf_counter()
    similarity, present = index.vector_scores(vector, TIMED_MODEL)
    report.steps["vector_scores"].append(time.perf_counter() - started)
    started = time.perf_counter()
    corrected = index.language_corrected(similarity, chosen & present, query, TIMED_MODEL)
    report.steps["language_corrected"].append(time.perf_counter() - started)
    started = time.perf_counter()
    keyword = index.keywords.scores(query, chosen)
    report.steps["keyword_scores"].append(time.perf_counter() - started)
    started = time.perf_counter()
    ranked("hybrid", corrected, chosen & present, keyword, chosen, index.tie_order, LIMIT)
    report.steps["ranked"].append(time.perf_counter() - started)
