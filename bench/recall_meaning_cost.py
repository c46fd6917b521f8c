"""What reranking past messages by meaning adds to a `build_context` call (no LLM, no pipeline).

    python -m bench.recall_meaning_cost --out bench/results/recall-meaning-cost-YYYY-MM-DD.json

A user's history of `--messages` turns (the synthetic LoCoMo conversation's turns, repeated
with their index so no two are equal) is ranked for each of the file's questions the way
`memstream.sdk.client` ranks its past messages, timing separately:

* `keywords`: `handlers.recall.keyword_candidates` over the whole history (what every call
  already cost before the rerank; the baseline of the figure);
* `meaning_cold`: `memstream.sdk.meaning.similarity` for the query and its candidates with an
  empty vector cache (a user asked about for the first time);
* `meaning_shared`: the same with one cache for all the questions, asked one after the other
  (an agent asking about the same user: the candidates an earlier question embedded are
  found in the cache);
* `meaning_again`: every question asked a second time with that cache (all found in it: the
  least a call costs).

Median seconds per question of each, and the embedded texts per call, with the local embedder.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.locomo.dataset import SYNTHETIC, load
from bench.locomo.recall_eval import past_messages
from bench.locomo.scoring import scored
from bench.machine import machine
from handlers.recall import RERANK_POOL, PastMessage, keyword_candidates, meaning_text
from memstream.providers.local_embedder import load_local_embedder
from memstream.sdk.meaning import VectorCache, similarity


def history(size: int) -> list[PastMessage]:
    """`size` past messages made of the synthetic conversation's turns, each one distinct."""
    turns = [turned.message for sample in load(SYNTHETIC) for turned in past_messages(sample)]
    return [
        PastMessage(m.speaker, f"{m.text} ({i})", m.said_on, m.before)
        for i, m in ((i, turns[i % len(turns)]) for i in range(size))
    ]


def measured(size: int, most_questions: int = 0) -> dict[str, Any]:
    """The four timings (module doc) over the synthetic file's scored questions (the first
    `most_questions` of them; 0: all)."""
    messages = history(size)
    questions = [qa.question for sample in load(SYNTHETIC) for qa in scored(sample.qa)]
    questions = questions[:most_questions] if most_questions else questions
    embedder = load_local_embedder()
    embedder.embed(["warm the engine up"])
    shared = VectorCache()
    seconds: dict[str, list[float]] = {
        "keywords": [],
        "meaning_cold": [],
        "meaning_shared": [],
        "meaning_again": [],
    }
    texts_per_call: list[int] = []
    asked: list[tuple[str, list[str]]] = []
    for question in questions:
        started = time.perf_counter()
        candidates = keyword_candidates(question, messages, RERANK_POOL)
        seconds["keywords"].append(time.perf_counter() - started)
        texts = [meaning_text(candidate.message) for candidate in candidates]
        texts_per_call.append(len(texts) + 1)
        asked.append((question, texts))
        for name, cache in (("meaning_cold", VectorCache()), ("meaning_shared", shared)):
            started = time.perf_counter()
            similarity(embedder, cache, question, texts)
            seconds[name].append(time.perf_counter() - started)
    for question, texts in asked:
        started = time.perf_counter()
        similarity(embedder, shared, question, texts)
        seconds["meaning_again"].append(time.perf_counter() - started)
    return {
        "history_messages": size,
        "questions": len(questions),
        "texts_embedded_per_cold_call": statistics.median(texts_per_call),
        "median_seconds": {name: round(statistics.median(v), 4) for name, v in seconds.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2_000, help="the history's size")
    parser.add_argument("--questions", type=int, default=0, help="only the first N (0: all)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    started = datetime.now(UTC)
    result = {
        "command": " ".join(["python -m bench.recall_meaning_cost", *(argv or sys.argv[1:])]),
        "started": started.isoformat(timespec="seconds"),
        "machine": machine(),
        **measured(args.messages, args.questions),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
