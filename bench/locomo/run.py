"""LoCoMo against memstream: feed the conversations, answer the questions, score per category.

    python -m bench.locomo.run --data /path/to/locomo10.json --out locomo.json
        [--conversations N] [--context search|build_context] [--top-k 20] [--max-chars 4000]
        [--answer-base-url URL --answer-model M --answer-api-key K]
        [--judge-base-url URL --judge-model M --judge-api-key K]
        [--types semantic,episodic] [--embedded] [--timeout 3600]

`locomo10.json` is the public LoCoMo data set (non-commercial licence): give its path; it is
never downloaded and never committed. `--data synthetic` runs the small synthetic conversation
shipped for the tests.

The pipeline: with `KAFKA_BOOTSTRAP_SERVERS` and `MONGODB_URI` set (and not `--embedded`), an
existing deployment whose workers are running (its own window and memory types apply); else the
embedded one is started (Tansu in memory, SecantusDB, every stage worker, and the local model
if no `OPENAI_BASE_URL` is configured — taken under the machine's model lock), with a window
that makes each LoCoMo session one snapshot and the memory types of `--types`.

Answers come from the answer endpoint (default: the pipeline's LLM); with `--judge-model` every
answer is also judged CORRECT/WRONG (the J metric). Scores: `bench.locomo.scoring`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.llama_timings import llama_lock
from bench.locomo.answering import CountingChat, Endpoint
from bench.locomo.dataset import SYNTHETIC, Sample, load
from bench.locomo.evaluate import Options, evaluate
from bench.locomo.harness import LOCOMO_WINDOW
from bench.machine import machine
from memstream.config import Settings, load_settings


def _existing(environ: dict[str, str]) -> bool:
    return bool(environ.get("KAFKA_BOOTSTRAP_SERVERS") and environ.get("MONGODB_URI"))


@contextlib.contextmanager
def pipeline(args: argparse.Namespace, log_dir: Path) -> Iterator[tuple[Settings, str]]:
    """The settings of the pipeline to run against, and how it was obtained."""
    environ = dict(os.environ)
    if _existing(environ) and not args.embedded:
        yield load_settings(environ=environ), "existing deployment (its own window and types)"
        return
    from memstream.local_llm import wants_local_llm
    from memstream.runtime import running_pipeline

    for name in ("KAFKA_BOOTSTRAP_SERVERS", "MONGODB_URI"):
        environ.pop(name, None)
    environ.update(LOCOMO_WINDOW)
    environ["MEMSTREAM_ENABLED_EXTRACTIONS"] = args.types
    # running_pipeline re-reads the process environment for the workers' settings.
    os.environ.update({**LOCOMO_WINDOW, "MEMSTREAM_ENABLED_EXTRACTIONS": args.types})
    settings = load_settings(environ=environ)
    lock = llama_lock() if wants_local_llm(settings) else contextlib.nullcontext()
    with (
        lock,
        running_pipeline(settings, log_dir=log_dir, ephemeral=True) as (configured, _, _),
    ):
        yield configured, "embedded (Tansu in memory, SecantusDB)"


def endpoint(
    base_url: str | None, model: str | None, api_key: str | None, timeout: float
) -> Endpoint:
    if not base_url or not model:
        raise SystemExit("an answer endpoint needs a base URL and a model")
    return Endpoint(base_url, model, api_key or "not-needed", timeout)


async def _run(
    args: argparse.Namespace, settings: Settings, samples: Sequence[Sample]
) -> dict[str, Any]:
    answerer = CountingChat(
        endpoint(
            args.answer_base_url or settings.llm.base_url,
            args.answer_model or settings.llm.model,
            args.answer_api_key or settings.llm.api_key,
            args.llm_timeout,
        )
    )
    judge = None
    if args.judge_model:
        judge = CountingChat(
            endpoint(
                args.judge_base_url or answerer.endpoint.base_url,
                args.judge_model,
                args.judge_api_key or answerer.endpoint.api_key,
                args.llm_timeout,
            ),
            max_tokens=128,
        )
    options = Options(
        context=args.context,
        top_k=args.top_k,
        max_chars=args.max_chars,
        user_prefix=f"locomo-{datetime.now(UTC):%Y%m%d%H%M%S}-",
        catch_up_timeout=args.timeout,
    )
    try:
        return await evaluate(settings, samples, answerer, judge, options)
    finally:
        await answerer.close()
        if judge is not None:
            await judge.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", required=True, help="path to locomo10.json, or 'synthetic'")
    parser.add_argument("--conversations", type=int, default=0, help="only the first N (0: all)")
    parser.add_argument("--context", choices=("search", "build_context"), default="search")
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--max-chars", type=int, default=4_000, help="build_context's budget")
    parser.add_argument("--answer-base-url")
    parser.add_argument("--answer-model")
    parser.add_argument("--answer-api-key")
    parser.add_argument("--judge-base-url")
    parser.add_argument("--judge-model", help="judge every answer (the J metric)")
    parser.add_argument("--judge-api-key")
    parser.add_argument("--llm-timeout", type=float, default=900.0)
    parser.add_argument("--types", default="semantic", help="memory types (embedded pipeline)")
    parser.add_argument("--embedded", action="store_true", help="start the embedded pipeline")
    parser.add_argument("--timeout", type=float, default=3_600.0, help="catch-up, per conversation")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    data = SYNTHETIC if args.data == "synthetic" else Path(args.data)
    samples = load(data)
    if args.conversations:
        samples = samples[: args.conversations]
    with (
        tempfile.TemporaryDirectory(prefix="memstream-locomo-") as scratch,
        pipeline(args, Path(scratch)) as (settings, how),
    ):
        report = asyncio.run(_run(args, settings, samples))
    report = {
        "command": "python -m bench.locomo.run "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "data": data.name,
        "conversations": [sample.sample_id for sample in samples],
        "pipeline": how,
        "machine": machine(),
        **report,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n")
    print(json.dumps(report["scores"], indent=2))
    print(f"written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
