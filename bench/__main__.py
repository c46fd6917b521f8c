"""Every benchmark in one command: our figures beside baselines measured in the same run.

    python -m bench all [--quick] [--brokers apache,tansu] [--only ingest,window] [--update-docs]
    python -m bench ingest            # one suite
    python -m bench table bench/results/window-2026-11-30.json ... [--update-docs]

Writes ``bench/results/<name>.json`` (every figure and each suite's raw numbers) and
``bench/results/<name>.md`` (the table); ``--update-docs`` also puts the table into
BENCHMARKS.md between its ``bench:all`` markers. Exit status 1 if a suite failed (the others
still run and are reported).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.core import BROKER_NAMES, BenchContext, BrokerKind, SuiteResult, bench_context
from bench.machine import machine
from bench.report import render_markdown, render_runs, splice_into

SUITES: tuple[str, ...] = (
    "ingest",
    "window",
    "projection",
    "search",
    "llm_cost",
    "extraction_time",
    "freshness",
    "footprint",
    "locomo",
    "sealing",
    "encryption",
    "metrics",
    "scale",
)
"""Suite modules under ``bench.suites``, in the order they run and are reported."""

RESULTS = Path(__file__).parent / "results"
BENCHMARKS_MD = Path(__file__).parent.parent / "BENCHMARKS.md"


def run_suite(name: str, context: BenchContext) -> dict[str, Any]:
    module = importlib.import_module(f"bench.suites.{name}")
    started = time.perf_counter()
    print(f"── {name} …", file=sys.stderr, flush=True)
    try:
        result: SuiteResult = module.run(context)
    except Exception as error:  # a failed suite is reported; the others still run
        traceback.print_exc()
        return {
            "error": f"{type(error).__name__}: {error}",
            "seconds": time.perf_counter() - started,
        }
    seconds = time.perf_counter() - started
    context.results[name] = result
    print(f"   {name}: {len(result.figures)} figures in {seconds:.0f} s", file=sys.stderr)
    reported: dict[str, Any] = {
        "figures": [figure.to_json() for figure in result.figures],
        "raw": result.raw,
        "seconds": seconds,
    }
    if result.errors:
        reported["errors"] = result.errors
    return reported


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def join_runs(argv: list[str]) -> int:
    """`table FILES... [--update-docs]`: one table of earlier runs' figures, in suite order."""
    parser = argparse.ArgumentParser(prog="python -m bench table")
    parser.add_argument("reports", type=Path, nargs="+")
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args(argv)
    runs = [(json.loads(path.read_text()), _shown(path)) for path in args.reports]

    def first_suite(run: tuple[dict[str, Any], str]) -> int:
        return min((SUITES.index(s) for s in run[0]["suites"] if s in SUITES), default=99)

    text = render_runs(sorted(runs, key=first_suite))
    print(text)
    if args.update_docs:
        BENCHMARKS_MD.write_text(splice_into(BENCHMARKS_MD.read_text(), text))
    return 0


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["table"]:
        return join_runs(arguments[1:])
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("suite", choices=("all", *SUITES))
    parser.add_argument("--quick", action="store_true", help="the CI profile: a few minutes")
    parser.add_argument("--brokers", default="apache,tansu")
    parser.add_argument("--only", default="", help="comma-separated suites (with `all`)")
    parser.add_argument("--skip", default="", help="comma-separated suites to leave out")
    parser.add_argument("--name", default="", help="result file name (default: all[-quick])")
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--update-docs", action="store_true")
    parser.add_argument(
        "--local-model",
        choices=("small", "large", "none"),
        default=None,
        help="local model for the extraction-time and LoCoMo suites "
        "(default: small with --quick, large otherwise; none skips their local runs)",
    )
    parser.add_argument(
        "--locomo", type=Path, default=None, help="path to locomo10.json (never committed)"
    )
    parser.add_argument(
        "--scale-history",
        type=int,
        default=None,
        metavar="H",
        help="the scale suite's restart figures compare histories of H and 10H "
        "(default: 100 with --quick, 1000 otherwise)",
    )
    args = parser.parse_args(argv)

    brokers: list[BrokerKind] = []
    for kind in filter(None, args.brokers.split(",")):
        if kind not in BROKER_NAMES:
            parser.error(f"unknown broker {kind!r}: choose from {', '.join(BROKER_NAMES)}")
        brokers.append(kind)
    if args.suite == "all":
        chosen = [s for s in SUITES if not args.only or s in args.only.split(",")]
    else:
        chosen = [args.suite]
    chosen = [s for s in chosen if s not in args.skip.split(",")]
    unknown = set(filter(None, (args.only + "," + args.skip).split(","))) - set(SUITES)
    if unknown:
        parser.error(f"unknown suites: {', '.join(sorted(unknown))}")

    local_model = args.local_model or ("small" if args.quick else "large")
    name = args.name or ("all-quick" if args.quick else "all") + (
        "" if args.suite == "all" else f"-{args.suite}"
    )
    report: dict[str, Any] = {
        "command": "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average_before": os.getloadavg(),
        "profile": "quick" if args.quick else "full",
        "brokers": brokers,
        "local_model": local_model,
        "suites": {},
    }
    options = {
        "local_model": local_model,
        "locomo": args.locomo,
        "scale_history": args.scale_history,
    }
    with bench_context(quick=args.quick, brokers=brokers, options=options) as context:
        for suite in chosen:
            report["suites"][suite] = run_suite(suite, context)
    report["load_average_after"] = os.getloadavg()
    report["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")

    args.out_dir.mkdir(parents=True, exist_ok=True)
    json_path = args.out_dir / f"{name}.json"
    json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    table = render_markdown(report, _shown(json_path))
    (args.out_dir / f"{name}.md").write_text(table)
    print(table)
    if args.update_docs:
        BENCHMARKS_MD.write_text(splice_into(BENCHMARKS_MD.read_text(), table))
    failed = [
        s for s, result in report["suites"].items() if "error" in result or "errors" in result
    ]
    if failed:
        print(f"failed suites: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
