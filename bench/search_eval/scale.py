"""Search latency as one user's index grows: synthetic memories at 1k, 10k, 100k.

Each size gets `n` synthetic current memories: random unit vectors of the embedder's dimension
(as lists of floats, which is what MongoDB returns) and short texts — 70% English, "The user"
and 6-14 words drawn from the labelled set's English vocabulary; 30% Chinese, "用户" and 8-20
characters drawn from its Chinese characters — so keyword scoring sees realistic token counts.
Queries are the labelled queries' texts (cycled) with random unit vectors.

Timed per size:

* **build** — `UserIndex.built(revision, documents)` on documents already in memory (the
  MongoDB fetch is not included);
* **search** — one `ReadModel.search(mode="hybrid", limit=10)` call (the SDK's default) on the
  built index: the filter pass, `UserIndex.similarities`, `keyword_scores` over every text and
  `combine`. `ReadModel.search` computes both scores whatever the mode;
* **components** — the same query's `similarities`, `keyword_scores` and `combine` timed on
  their own, to show where the time goes; and, for comparison, the similarities' matrix-vector
  product done by `np.einsum` (numpy's own single-threaded loop) instead of `@` (OpenBLAS,
  which starts threads of its own on a matrix of a few thousand rows or more);
* **the proposed fast path** (`bench.search_eval.fast`) — its extra build step
  (`FastIndex.built`, on top of `UserIndex.built`) and its search, whose top 10 (ids and scores)
  must equal `ReadModel.search`'s for every query.
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
from bench.search_eval.fast import FastIndex
from bench.search_eval.pipeline import InMemoryReadModel
from bench.search_eval.scoring import percentile
from handlers.search import combine, keyword_scores
from memstream.search_index import UserIndex

USER = "scale-user"
MODEL = "synthetic"
COMPONENTS = ("similarities", "similarities_einsum", "keyword_scores", "combine")


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
    n: int, dimension: int, vocabulary: Vocabulary, seed: int
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
            "memory_type": "semantic",
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
            "embedding": vector,
            "embedding_model": MODEL,
        }
        for i, vector in enumerate(vectors.tolist())
    ]


@dataclass
class SizeReport:
    """Timings (seconds) at one index size."""

    size: int
    build: list[float] = field(default_factory=list)
    search: list[float] = field(default_factory=list)
    components: dict[str, list[float]] = field(
        default_factory=lambda: {name: [] for name in COMPONENTS}
    )
    fast_build: list[float] = field(default_factory=list)
    fast_search: list[float] = field(default_factory=list)
    fast_mismatches: list[int] = field(default_factory=list)
    """Indexes of the queries whose fast top 10 differs from the SDK's."""

    def summary(self) -> dict[str, Any]:
        def ms(values: Sequence[float]) -> dict[str, float]:
            scaled = [v * 1000 for v in values]
            return {"p50": percentile(scaled, 50), "p95": percentile(scaled, 95)}

        def runs(values: Sequence[float]) -> dict[str, Any]:
            scaled = [v * 1000 for v in values]
            return {"median": percentile(scaled, 50), "runs": scaled}

        return {
            "size": self.size,
            "queries": len(self.search),
            "build_ms": runs(self.build),
            "search_ms": ms(self.search),
            "components_ms": {name: ms(values) for name, values in self.components.items()},
            "fast": {
                "extra_build_ms": runs(self.fast_build),
                "search_ms": ms(self.fast_search),
                "top10_equal_to_sdk": len(self.fast_search) - len(self.fast_mismatches),
                "mismatched_queries": self.fast_mismatches,
            },
        }


def measure(
    size: int,
    *,
    dimension: int,
    vocabulary: Vocabulary,
    queries: Sequence[str],
    builds: int,
    seed: int,
    progress: Callable[[str], None] = lambda _: None,
) -> SizeReport:
    """Build the index `builds` times and time every query in `queries` against it."""
    report = SizeReport(size)
    documents = synthetic_documents(size, dimension, vocabulary, seed)
    index = UserIndex.built(1, documents)
    for _ in range(builds):
        started = time.perf_counter()
        index = UserIndex.built(1, documents)
        report.build.append(time.perf_counter() - started)
    progress(f"{size}: built in {report.build[-1] * 1000:.0f} ms")
    del documents
    rng = np.random.default_rng(seed + 1)
    vectors = rng.standard_normal((len(queries), dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    found = asyncio.run(_search_all(index, queries, vectors.tolist(), report))
    texts = [document["text"] for document in index.documents]
    for query, vector in zip(queries, vectors.tolist(), strict=True):
        _time_components(index, texts, query, vector, report)
    progress(
        f"{size}: search p50 {percentile(report.search, 50) * 1000:.1f} ms, "
        f"p95 {percentile(report.search, 95) * 1000:.1f} ms"
    )
    fast = FastIndex.built(index)
    for _ in range(builds):
        started = time.perf_counter()
        fast = FastIndex.built(index)
        report.fast_build.append(time.perf_counter() - started)
    for number, (query, vector) in enumerate(zip(queries, vectors.tolist(), strict=True)):
        started = time.perf_counter()
        top = fast.search(query, vector, MODEL, mode="hybrid", limit=10)
        report.fast_search.append(time.perf_counter() - started)
        ids = [(str(index.documents[p]["memory_id"]), score) for p, score in top]
        if ids != found[number]:
            report.fast_mismatches.append(number)
    progress(
        f"{size}: fast search p50 {percentile(report.fast_search, 50) * 1000:.2f} ms, "
        f"p95 {percentile(report.fast_search, 95) * 1000:.2f} ms, "
        f"{len(report.fast_mismatches)} differ from the SDK"
    )
    return report


async def _search_all(
    index: UserIndex,
    queries: Sequence[str],
    vectors: Sequence[Sequence[float]],
    report: SizeReport,
) -> list[list[tuple[str, float]]]:
    """Each query's top 10 as (memory id, score)."""
    read_model = InMemoryReadModel({USER: index})
    found = []
    for query, vector in zip(queries, vectors, strict=True):
        started = time.perf_counter()
        top = await read_model.search(USER, query, vector, MODEL, mode="hybrid", limit=10)
        report.search.append(time.perf_counter() - started)
        found.append([(str(d["memory_id"]), float(d["score"])) for d in top])
    return found


def _time_components(
    index: UserIndex, texts: list[str], query: str, vector: list[float], report: SizeReport
) -> None:
    """`ReadModel.search`'s three steps, each timed alone (no filters: every memory chosen)."""
    started = time.perf_counter()
    similarities = index.similarities(vector, MODEL)
    report.components["similarities"].append(time.perf_counter() - started)
    started = time.perf_counter()
    _einsum_similarities(index, vector)
    report.components["similarities_einsum"].append(time.perf_counter() - started)
    started = time.perf_counter()
    keyword_list = keyword_scores(query, texts)
    report.components["keyword_scores"].append(time.perf_counter() - started)
    vector_scores = {str(p): s for p, s in similarities.items()}
    keyword = {str(p): s for p, s in enumerate(keyword_list)}
    started = time.perf_counter()
    combine("hybrid", vector_scores, keyword, 10)
    report.components["combine"].append(time.perf_counter() - started)


def _einsum_similarities(index: UserIndex, query: Sequence[float]) -> dict[int, float]:
    """`UserIndex.similarities` with `np.einsum` for the product (the proposed change)."""
    positions, matrix = index.matrices[MODEL]
    vector = np.asarray(query, dtype=np.float32)
    scores = np.einsum("ij,j->i", matrix, vector / (float(np.linalg.norm(vector)) or 1.0))
    return {position: float(score) for position, score in zip(positions, scores, strict=True)}
