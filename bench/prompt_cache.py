"""The local LLM server's RSS and speed over distinct extraction prompts, per prompt-cache setting.

    .venv/bin/python bench/prompt_cache.py [--local small|large] [--prompts 12] [--max-tokens 256]
        [--variants today,stock-no-logits,bounded,no-cache] [--out FILE]

Each variant starts the packaged model's server afresh (one at a time, under the machine's
llama lock), sends one untimed warm-up request, then `--prompts` distinct extraction prompts:
the first conversations of `bench/extraction_eval/cases-semantic.json`, each as one snapshot,
asked of the four memory types' extractors in turn (snapshot by snapshot, type by type: how the
four stages' requests reach one server). The prompts are the extractors' own
(`Extractor.prompt`), sent as the stages send them (`OpenAIChatModel.complete_json`), one call
each (no validation retries, so every variant makes the same calls), answers bounded to
`--max-tokens` (256: the cache acts on the prompt, and a runaway answer of the 0.5B model
would only add minutes of generation that every variant pays alike).

After every call: its wall seconds, the server's RSS (with its children, `bench/rss.py`), and
from the server's log the prompt tokens llama.cpp evaluated (a cache hit evaluates only what
follows the shared prefix) and whether the call was served from the prompt cache.

Variants:

* ``today``: the stock ``python -m llama_cpp.server`` as `memstream up` started it before this
  change (``--cache true --cache_size 1 GiB``, the server's default ``--logits_all true``);
* ``stock-no-logits``: the stock server and cache with ``--logits_all false``;
* ``bounded``: `memstream.runtime.local.llama_server` with
`memstream.runtime.llm_choice.PROMPT_CACHE` (what `up`
  runs now: ``--logits_all false`` and the cache bounded by the bytes it holds);
* ``no-cache``: `memstream.runtime.local.llama_server` with ``--logits_all false`` and no cache (the
  speed the cache is there to beat).

Reported per variant: RSS after the warm-up, after the first round of four types, and at the
end; growth per prompt after the first round (least squares); median seconds and evaluated
prompt tokens per call over the calls after each type's first (warm).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.extraction_eval.run import DEFAULT_CASES, snapshot_for, warm_up
from bench.extraction_eval.scoring import parse_cases
from bench.llama_timings import LogCursor, llama_lock, parse_timings
from bench.machine import machine
from bench.rss import tree_rss
from events.memories import MEMORY_TYPES
from handlers.extraction.registry import extractor_for
from memstream.providers.clients import OpenAIChatModel
from memstream.runtime.llm_choice import PROMPT_CACHE
from memstream.runtime.local.llm import SERVER_MODULE, start_local_llm
from memstream.runtime.local.weights import DEFAULT_MODEL, MODELS

STOCK_SERVER = "llama_cpp.server"
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "today": (STOCK_SERVER, ("--cache", "true", "--cache_size", str(1 << 30))),
    "stock-no-logits": (
        STOCK_SERVER,
        ("--logits_all", "false", "--cache", "true", "--cache_size", str(1 << 30)),
    ),
    "bounded": (SERVER_MODULE, PROMPT_CACHE),
    "no-cache": (SERVER_MODULE, ("--logits_all", "false")),
}
"""Variant name: (server module, extra server arguments)."""

_CACHE_HIT = re.compile(r"Llama\._create_completion: cache hit")
_PREFIX = re.compile(r"Llama\.generate: (\d+) prefix-match hit")


@dataclass(frozen=True)
class Call:
    """One extraction prompt sent to the server."""

    index: int
    case: str
    memory_type: str
    seconds: float
    rss_mb: float
    prompt_tokens: int
    """The prompt's length, as the server counted it."""
    evaluated_tokens: int
    """Prompt tokens llama.cpp evaluated (the rest came from the cache or the live context)."""
    reused_tokens: int | None
    """The prefix reused, as the server logged it (None: nothing reused)."""
    cache_hit: bool
    completion_tokens: int
    prompt_ms: float
    """llama.cpp's prompt evaluation time (from its log)."""
    generation_ms: float


def prompts(count: int) -> list[tuple[str, str, list[dict[str, str]]]]:
    """`count` distinct (case, type, messages): snapshot by snapshot, the four types in turn
    (the cases that are asked of every type come first: labelled semantic ones)."""
    cases = [
        case
        for case in parse_cases(json.loads(DEFAULT_CASES.read_text(encoding="utf-8")))
        if getattr(case, "memory_type", "semantic") == "semantic"
    ]
    chosen: list[tuple[str, str, list[dict[str, str]]]] = []
    for case in cases:
        snapshot = snapshot_for(case)
        for memory_type in MEMORY_TYPES:
            chosen.append((case.id, memory_type, extractor_for(memory_type).prompt(snapshot)))
            if len(chosen) == count:
                return chosen
    raise SystemExit(f"only {len(chosen)} distinct prompts in {DEFAULT_CASES}")


async def send_all(
    llm: OpenAIChatModel,
    chosen: Sequence[tuple[str, str, list[dict[str, str]]]],
    pid: int,
    log: LogCursor,
    progress: Callable[[list[Call]], None],
) -> list[Call]:
    log.read()  # the warm-up's lines
    calls = []
    for index, (case, memory_type, messages) in enumerate(chosen):
        started = time.perf_counter()
        answer = await llm.complete_json(messages)
        seconds = time.perf_counter() - started
        text = log.read()
        prefix = _PREFIX.findall(text)
        timings = parse_timings(text)
        calls.append(
            Call(
                index=index,
                case=case,
                memory_type=memory_type,
                seconds=seconds,
                rss_mb=tree_rss(pid) or 0.0,
                prompt_tokens=answer.prompt_tokens,
                evaluated_tokens=timings.prompt_tokens,
                reused_tokens=int(prefix[-1]) if prefix else None,
                cache_hit=bool(_CACHE_HIT.search(text)),
                completion_tokens=answer.completion_tokens,
                prompt_ms=timings.prompt_ms,
                generation_ms=timings.eval_ms,
            )
        )
        print(
            f"  {index:3d} {memory_type:10} {seconds:6.1f}s rss {calls[-1].rss_mb:7.0f} MB "
            f"evaluated {calls[-1].evaluated_tokens:5d}/{answer.prompt_tokens:5d} tokens",
            flush=True,
        )
        progress(calls)
    return calls


def slope(values: Sequence[float]) -> float:
    """Least-squares growth per step of `values` (0 for fewer than two)."""
    if len(values) < 2:
        return 0.0
    xs = range(len(values))
    x_mean, y_mean = statistics.fmean(xs), statistics.fmean(values)
    numerator = sum((x - x_mean) * (y - y_mean) for x, y in zip(xs, values, strict=True))
    return numerator / sum((x - x_mean) ** 2 for x in xs)


def summarize(calls: Sequence[Call], warm_rss: float, start_rss: float) -> dict[str, Any]:
    round_size = len(MEMORY_TYPES)
    warm = calls[round_size:]  # each type's first prompt cannot hit the cache
    after_round = calls[round_size - 1].rss_mb if len(calls) >= round_size else warm_rss
    return {
        "rss_mb": {
            "started": start_rss,
            "after_warm_up": warm_rss,
            "after_first_round": after_round,
            "end": calls[-1].rss_mb,
            "peak": max(c.rss_mb for c in calls),
            "growth_per_prompt_after_first_round": slope([c.rss_mb for c in warm]),
        },
        "warm_calls": len(warm),
        "median_seconds_warm": statistics.median(c.seconds for c in warm),
        "mean_seconds_warm": statistics.fmean(c.seconds for c in warm),
        "median_prompt_seconds_warm": statistics.median(c.prompt_ms / 1000 for c in warm),
        "median_evaluated_tokens_warm": statistics.median(c.evaluated_tokens for c in warm),
        "median_prompt_tokens_warm": statistics.median(c.prompt_tokens for c in warm),
        "cache_hits": sum(c.cache_hit for c in calls),
        "total_seconds": sum(c.seconds for c in calls),
    }


def run_variant(
    name: str,
    spec: Any,
    chosen: Sequence[Any],
    log_dir: Path,
    max_tokens: int,
    progress: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    module, extra = VARIANTS[name]
    log_path = log_dir / f"llm-{name}.log"
    print(f"{name}: {module} {' '.join(extra)}", flush=True)
    with start_local_llm(
        spec, log_path=log_path, extra_args=extra, server_module=module, startup_timeout=300
    ) as server:
        assert server.pid is not None
        start_rss = tree_rss(server.pid) or 0.0
        llm = OpenAIChatModel(
            base_url=server.base_url,
            api_key="x",
            model=server.model,
            timeout=900,
            max_tokens=max_tokens,
        )
        cursor = LogCursor(log_path)

        async def measure() -> tuple[list[Call], float]:
            try:
                await warm_up(llm)
                assert server.pid is not None
                warm_rss = tree_rss(server.pid) or 0.0
                partial = {"server": module, "arguments": list(extra), "partial": True}

                def record(calls: list[Call]) -> None:
                    progress({**partial, "calls": [asdict(call) for call in calls]})

                return await send_all(llm, chosen, server.pid, cursor, record), warm_rss
            finally:
                await llm.aclose()

        calls, warm_rss = asyncio.run(measure())
    return {
        "server": module,
        "arguments": list(extra),
        "summary": summarize(calls, warm_rss, start_rss),
        "calls": [asdict(call) for call in calls],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--local", choices=["small", "large"], default="small")
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=256,
        help="completion bound (the stages' default is 1024; the cache acts on the prompt)",
    )
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/memstream-prompt-cache"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also as a background job
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    names = [name.strip() for name in args.variants.split(",") if name.strip()]
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    spec = DEFAULT_MODEL if args.local == "large" else MODELS[args.local]
    chosen = prompts(args.prompts)
    args.log_dir.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)
    result: dict[str, Any] = {
        "setup": {
            "model": spec.alias,
            "prompts": args.prompts,
            "max_tokens": args.max_tokens,
            "cases": sorted({case for case, _, _ in chosen}),
            "machine": machine(),
            "started": f"{started:%Y-%m-%d %H:%M} UTC",
            "command": "bench/prompt_cache.py " + " ".join(argv or sys.argv[1:]),
        },
        "variants": {},
    }

    def save() -> None:
        if args.out:  # what is measured so far survives an interrupted run
            args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")

    with llama_lock():
        for name in names:

            def progress(partial: dict[str, Any], name: str = name) -> None:
                result["variants"][name] = partial
                save()

            result["variants"][name] = run_variant(
                name, spec, chosen, args.log_dir, args.max_tokens, progress
            )
            save()
    for name, variant in result["variants"].items():
        summary = variant["summary"]
        rss = summary["rss_mb"]
        print(
            f"{name:16} rss {rss['after_warm_up']:6.0f} -> {rss['end']:6.0f} MB "
            f"(+{rss['growth_per_prompt_after_first_round']:5.1f} MB/prompt), warm "
            f"{summary['median_seconds_warm']:5.1f} s/call "
            f"({summary['median_prompt_seconds_warm']:4.1f} s prompt), "
            f"{summary['median_evaluated_tokens_warm']:.0f} tokens evaluated"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
