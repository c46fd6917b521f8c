"""Search evaluation: quality on a labelled set, latency as one user's index grows.

    .venv/bin/python bench/search_eval/run.py [--out results.json] [--data FILE]
        [--sizes 1000,10000,100000] [--scale-queries 50] [--builds 3] [--threads N]
        [--no-scale] [--no-variants] [--seed 7]

**Quality.** The labelled set (`data.json`, read by `bench.search_eval.dataset`) is embedded
with the local embedder (`load_local_embedder()`) exactly as the pipeline stores memories and as
`MemoryClient.search` embeds queries, each user's `UserIndex` is built, and every query is
ranked by `ReadModel.search` in the three modes (`bench.search_eval.pipeline`). Recall@1,
recall@5 and MRR (`bench.search_eval.scoring`) per mode, overall, by query language,
cross-lingual and by memory type (`bench.search_eval.quality`), and the p50/p95 ranking and
query-embedding latencies.

**Variants** (`bench.search_eval.variants`): e5's ``passage: `` prefix for memories, keyword
scoring without tokens found in most memories, relative score fusion for hybrid, and the
proposed exact fast path (`bench.search_eval.fast`), checked to rank exactly like the SDK.

**Scale** (`bench.search_eval.scale`): synthetic memories at each size; build time and p50/p95
of one hybrid search, with its components, and the fast path beside it.

The tables are printed as Markdown; ``--out`` writes everything as JSON, with every query's
ranked ids and the rank of each labelled answer.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.search_eval.dataset import DEFAULT_DATA, LabelledSet, load
from bench.search_eval.fast import COMMON_SHARE
from bench.search_eval.quality import (
    MODES,
    QualityReport,
    Searcher,
    evaluate,
    groups,
    report_json,
    score_header,
    score_rows,
    sdk_indexes,
    sdk_searcher,
)
from bench.search_eval.scale import SizeReport, Vocabulary, measure
from bench.search_eval.scoring import markdown_table
from bench.search_eval.variants import (
    FUSION_WEIGHTS,
    fast_searcher,
    fusion_searcher,
    passage_embedder,
)
from handlers.ports import Embedder
from handlers.search import SearchMode
from memstream.local.embedder import load_local_embedder
from memstream.search_index import UserIndex

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OMP_WAIT_POLICY")
"""Recorded with the results: they decide how numpy's BLAS and the embedder use the cores."""
VARIANT_GROUPS = ("all", "query in en", "query in zh", "cross-lingual", "same language")


def machine() -> dict[str, Any]:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 0
    return {
        "cpus": cpus,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
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


# -- quality -------------------------------------------------------------------------------------


def quality_section(data: LabelledSet, report: QualityReport) -> str:
    named = groups(data)
    lines = [markdown_table(score_header(), score_rows(report, named)), ""]
    rows = [[mode, *(f"{v:.2f}" for v in report.latency(mode))] for mode in MODES]
    lines.append(markdown_table(["ranking (ReadModel.search)", "p50 ms", "p95 ms"], rows))
    embed = report_json(data, report, named)["query_embedding_ms"]
    lines.append(
        f"\nquery embedding (`embed([query])`): p50 {embed['p50']:.1f} ms, "
        f"p95 {embed['p95']:.1f} ms"
    )
    return "\n".join(lines)


# -- variants ------------------------------------------------------------------------------------


def run_variants(
    data: LabelledSet,
    embedder: Embedder,
    sdk_report: QualityReport,
    indexes: dict[str, UserIndex],
    threads: int | None,
    progress: Callable[[str], None],
) -> list[tuple[str, Sequence[SearchMode], QualityReport]]:
    """(name, modes worth showing, report) for every variant, the SDK's first."""
    model = embedder.model_name
    passage = passage_embedder(threads)
    passage_indexes = sdk_indexes(data, passage, model)
    runs: list[tuple[str, Sequence[SearchMode], Searcher, Embedder]] = [
        ("fast path (must equal the SDK)", MODES, fast_searcher(indexes, model), embedder),
        (
            "memories `passage:`, queries `query:`",
            ("vector", "hybrid"),
            sdk_searcher(passage_indexes, model),
            embedder,
        ),
        (
            "memories and queries `passage:`",
            ("vector", "hybrid"),
            sdk_searcher(passage_indexes, model),
            passage,
        ),
        (
            f"keyword ignores tokens in > {COMMON_SHARE:.0%} of memories",
            ("keyword", "hybrid"),
            fast_searcher(indexes, model, common_share=COMMON_SHARE),
            embedder,
        ),
    ]
    runs += [
        (f"hybrid = relative score fusion, vector weight {w}", ("hybrid",), searcher, embedder)
        for w in FUSION_WEIGHTS
        for searcher in [fusion_searcher(indexes, model, w)]
    ]
    found: list[tuple[str, Sequence[SearchMode], QualityReport]] = [
        ("SDK: `query:` for both, RRF hybrid", MODES, sdk_report)
    ]
    for name, modes, searcher, query_embedder in runs:
        progress(f"variant: {name}")
        found.append((name, modes, evaluate(data, query_embedder, searcher, modes=modes)))
    return found


def variants_section(
    data: LabelledSet, variants: Sequence[tuple[str, Sequence[SearchMode], QualityReport]]
) -> str:
    named = groups(data)
    users = [user.user_id for user in data.users]
    by_user = {u: {q.id for q in data.queries if q.user_id == u} for u in users}
    header = ["variant", "mode", "R@5", *(f"MRR {g}" for g in VARIANT_GROUPS)]
    header += [f"MRR {u}" for u in users]
    rows = []
    for name, modes, report in variants:
        for mode in modes:
            row = [name, mode, f"{report.scores(mode).recall_at_5:.2f}"]
            row += [f"{report.scores(mode, named[g]).mrr:.3f}" for g in VARIANT_GROUPS]
            row += [f"{report.scores(mode, by_user[u]).mrr:.3f}" for u in users]
            rows.append(row)
    sdk = variants[0][2]
    fast = next(report for name, _, report in variants if name.startswith("fast path"))
    same = sum(a.ranked == b.ranked for a, b in zip(sdk.runs, fast.runs, strict=True))
    return markdown_table(header, rows) + (
        f"\n\nfast path: {same} of {len(sdk.runs)} full rankings identical to the SDK's"
    )


def variants_json(
    data: LabelledSet, variants: Sequence[tuple[str, Sequence[SearchMode], QualityReport]]
) -> list[dict[str, Any]]:
    named = groups(data)
    return [
        {
            "variant": name,
            "summary": {
                group: {mode: vars(report.scores(mode, ids)) for mode in modes}
                for group, ids in named.items()
            },
            "queries": [
                {"id": run.query_id, "mode": run.mode, "answer_ranks": run.answer_ranks}
                for run in report.runs
            ],
        }
        for name, modes, report in variants[1:]
    ]


# -- scale ---------------------------------------------------------------------------------------


def scale_section(reports: Sequence[SizeReport]) -> str:
    header = [
        "memories",
        "build ms",
        "search p50 ms",
        "search p95 ms",
        "similarities p95",
        "(einsum) p95",
        "keyword_scores p95",
        "combine p95",
        "fast: extra build ms",
        "fast p50 ms",
        "fast p95 ms",
        "fast = SDK",
    ]
    rows = []
    for report in reports:
        s = report.summary()
        c, f = s["components_ms"], s["fast"]
        rows.append(
            [
                f"{report.size:,}",
                f"{s['build_ms']['median']:.0f}",
                f"{s['search_ms']['p50']:.1f}",
                f"{s['search_ms']['p95']:.1f}",
                f"{c['similarities']['p95']:.1f}",
                f"{c['similarities_einsum']['p95']:.1f}",
                f"{c['keyword_scores']['p95']:.1f}",
                f"{c['combine']['p95']:.1f}",
                f"{f['extra_build_ms']['median']:.0f}",
                f"{f['search_ms']['p50']:.2f}",
                f"{f['search_ms']['p95']:.2f}",
                f"{f['top10_equal_to_sdk']}/{s['queries']}",
            ]
        )
    text = markdown_table(header, rows)
    ratios = scale_ratios(reports)
    if ratios:
        text += (
            f"\n\np95({ratios['largest']:,}) / p95({ratios['smallest']:,}): "
            f"SDK {ratios['sdk']:.0f}x, fast path {ratios['fast']:.0f}x (target ≤ 2x)"
        )
    return text


def scale_ratios(reports: Sequence[SizeReport]) -> dict[str, Any]:
    if len(reports) < 2:
        return {}
    small, large = reports[0].summary(), reports[-1].summary()
    return {
        "smallest": small["size"],
        "largest": large["size"],
        "sdk": large["search_ms"]["p95"] / small["search_ms"]["p95"],
        "fast": large["fast"]["search_ms"]["p95"] / small["fast"]["search_ms"]["p95"],
    }


# -- main ----------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="labelled set")
    parser.add_argument("--out", type=Path, help="write the JSON report here")
    parser.add_argument(
        "--sizes", default="1000,10000,100000", help="comma list of index sizes to time"
    )
    parser.add_argument("--scale-queries", type=int, default=50, help="queries per size")
    parser.add_argument("--builds", type=int, default=3, help="index builds timed per size")
    parser.add_argument("--threads", type=int, help="embedder threads (default: all cores)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic memories")
    parser.add_argument("--no-scale", action="store_true", help="skip the scale measurement")
    parser.add_argument("--no-variants", action="store_true", help="skip the variants")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = datetime.now(UTC)
    load_before = machine()["load_average"]
    data = load(args.data)
    embedder = load_local_embedder(num_threads=args.threads)
    model = embedder.model_name
    begun = time.perf_counter()
    indexes = sdk_indexes(data, embedder, model)
    progress(f"embedded the memories in {time.perf_counter() - begun:.1f} s")
    report = evaluate(data, embedder, sdk_searcher(indexes, model))
    sections = ["## Quality (the SDK as it is)", quality_section(data, report)]
    variants: list[tuple[str, Sequence[SearchMode], QualityReport]] = []
    if not args.no_variants:
        variants = run_variants(data, embedder, report, indexes, args.threads, progress)
        sections += ["## Variants (MRR)", variants_section(data, variants)]
    scale: list[SizeReport] = []
    if not args.no_scale:
        vocabulary = Vocabulary.of(data)
        texts = [q.text for q in data.queries]
        queries = [texts[i % len(texts)] for i in range(args.scale_queries)]
        for size in (int(s) for s in args.sizes.split(",")):
            scale.append(
                measure(
                    size,
                    dimension=embedder.dimension,
                    vocabulary=vocabulary,
                    queries=queries,
                    builds=args.builds,
                    seed=args.seed,
                    progress=progress,
                )
            )
        sections += ["## Latency as the index grows (hybrid, limit 10)", scale_section(scale)]
    print("\n\n".join(sections))
    if args.out:
        document = {
            "date": started.isoformat(timespec="seconds"),
            "command": "python bench/search_eval/run.py " + " ".join(argv or sys.argv[1:]),
            "machine": machine() | {"load_average_at_start": load_before},
            "embedding_model": model,
            "embedder_threads": args.threads,
            "data": describe(data),
            "quality": report_json(data, report, groups(data)),
            "variants": variants_json(data, variants) if variants else [],
            "scale": [r.summary() for r in scale],
            "scale_ratio_p95": scale_ratios(scale),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )
        progress(f"report written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
