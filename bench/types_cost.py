"""What extracting all four memory types costs against semantic alone, on the local model.

    .venv/bin/python bench/types_cost.py --local large [--cache] [--cases 8] [--out FILE]
    .venv/bin/python bench/types_cost.py --base-url URL --model NAME [...]

For each labelled conversation of `bench/extraction_eval/cases-semantic.json` (the first
`--cases`), one snapshot is built as the extraction evaluation builds it, then extracted by the
four extractors one after the other (semantic first), as the four stages' requests reach one
llama.cpp server (which answers one request at a time), with `extract()` exactly as the stages
run it (validation, retries). "Semantic alone" is the semantic extraction of each snapshot, "all
four" the four together: measured in the same run, snapshot by snapshot, so load on the machine
falls on both alike. Reported per snapshot and in total: wall seconds, LLM calls, prompt and
completion tokens (as the server counted them), and the ratio all-four / semantic.
With `--local` the script starts the packaged model itself; `--cache` starts it with
llama.cpp's prompt cache (`--cache true`), which keeps the state of earlier prompts and
evaluates only what follows the longest prefix a new prompt shares with one of them — each
type's long system prompt is then evaluated once, not once per snapshot.
The first request of a run is an untimed warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.extraction_eval.run import DEFAULT_CASES, snapshot_for, warm_up
from bench.extraction_eval.scoring import parse_cases
from events.memories import MEMORY_TYPES, MemoryType
from handlers.extraction.base import extract
from handlers.extraction.registry import extractor_for
from handlers.ports import ChatModel
from memstream.providers.clients import OpenAIChatModel


@dataclass(frozen=True)
class Run:
    """One extraction of one conversation by one type."""

    case: str
    memory_type: str
    seconds: float
    calls: int
    prompt_tokens: int
    completion_tokens: int
    memories: int
    failure: str | None


async def run_types(
    llm: ChatModel, cases: list[Any], types: tuple[MemoryType, ...], attempts: int
) -> list[Run]:
    runs = []
    for case in cases:
        snapshot = snapshot_for(case)
        for memory_type in types:
            started = time.perf_counter()
            outcome = await extract(extractor_for(memory_type), snapshot, llm, attempts=attempts)
            runs.append(
                Run(
                    case=case.id,
                    memory_type=memory_type,
                    seconds=time.perf_counter() - started,
                    calls=len(outcome.answers),
                    prompt_tokens=sum(a.prompt_tokens for a in outcome.answers),
                    completion_tokens=sum(a.completion_tokens for a in outcome.answers),
                    memories=len(outcome.memories),
                    failure=outcome.failure,
                )
            )
            print(f"  {case.id:32} {memory_type:10} {runs[-1].seconds:6.1f}s", flush=True)
    return runs


def totals(runs: list[Run]) -> dict[str, float]:
    return {
        "seconds": sum(r.seconds for r in runs),
        "calls": sum(r.calls for r in runs),
        "prompt_tokens": sum(r.prompt_tokens for r in runs),
        "completion_tokens": sum(r.completion_tokens for r in runs),
    }


def per_snapshot(runs: list[Run]) -> dict[str, float]:
    by_case: dict[str, list[Run]] = {}
    for run in runs:
        by_case.setdefault(run.case, []).append(run)
    seconds = [sum(r.seconds for r in case_runs) for case_runs in by_case.values()]
    calls = [sum(r.calls for r in case_runs) for case_runs in by_case.values()]
    return {
        "median_seconds": statistics.median(seconds),
        "mean_seconds": statistics.fmean(seconds),
        "mean_calls": statistics.fmean(calls),
    }


def report(semantic: list[Run], four: list[Run]) -> dict[str, Any]:
    one, all_four = totals(semantic), totals(four)
    return {
        "semantic": {"total": one, "per_snapshot": per_snapshot(semantic)},
        "all_four": {"total": all_four, "per_snapshot": per_snapshot(four)},
        "ratio": {name: all_four[name] / one[name] if one[name] else None for name in one},
        "per_type_seconds": {
            memory_type: statistics.median(r.seconds for r in four if r.memory_type == memory_type)
            for memory_type in MEMORY_TYPES
        },
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        "| | seconds / snapshot (median) | LLM calls / snapshot | prompt tokens | "
        "completion tokens | total seconds |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name in ("semantic", "all_four"):
        part = result[name]
        lines.append(
            f"| {name} | {part['per_snapshot']['median_seconds']:.1f} | "
            f"{part['per_snapshot']['mean_calls']:.2f} | {part['total']['prompt_tokens']} | "
            f"{part['total']['completion_tokens']} | {part['total']['seconds']:.0f} |"
        )
    ratio = result["ratio"]
    lines.append(
        f"| **ratio** | | {ratio['calls']:.2f} | {ratio['prompt_tokens']:.2f} | "
        f"{ratio['completion_tokens']:.2f} | **{ratio['seconds']:.2f}** |"
    )
    return "\n".join(lines)


async def measure(llm: ChatModel, cases: list[Any], attempts: int) -> dict[str, Any]:
    await warm_up(llm)
    four = await run_types(llm, cases, MEMORY_TYPES, attempts)
    semantic = [r for r in four if r.memory_type == "semantic"]
    result = report(semantic, four)
    result["runs"] = [asdict(r) for r in four]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--local", choices=["small", "large"])
    parser.add_argument("--cache", action="store_true", help="llama.cpp's prompt cache (--local)")
    parser.add_argument("--base-url")
    parser.add_argument("--model", default="local")
    parser.add_argument("--api-key", default="not-needed")
    parser.add_argument("--cases", type=int, default=8, help="how many conversations")
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    cases = [
        c
        for c in parse_cases(json.loads(DEFAULT_CASES.read_text(encoding="utf-8")))
        if getattr(c, "memory_type", "semantic") == "semantic"
    ][: args.cases]

    def chat(base_url: str, model: str) -> ChatModel:
        return OpenAIChatModel(
            base_url=base_url, api_key=args.api_key, model=model, timeout=args.timeout
        )

    started = datetime.now(UTC)
    if args.local:
        from memstream.runtime.local.llm import start_local_llm
        from memstream.runtime.local.weights import DEFAULT_MODEL, MODELS

        spec = DEFAULT_MODEL if args.local == "large" else MODELS[args.local]
        extra = ["--cache", "true"] if args.cache else []
        with start_local_llm(spec, extra_args=extra, startup_timeout=300) as server:
            result = asyncio.run(measure(chat(server.base_url, server.model), cases, args.attempts))
            model = server.model
    else:
        if not args.base_url:
            parser.error("give --local or --base-url")
        result = asyncio.run(measure(chat(args.base_url, args.model), cases, args.attempts))
        model = args.model
    result["setup"] = {
        "model": model,
        "prompt_cache": args.cache,
        "cases": [c.id for c in cases],
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        "started": f"{started:%Y-%m-%d %H:%M} UTC",
    }
    print(table(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
