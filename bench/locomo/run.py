"""LoCoMo against memstream: feed the conversations, answer the questions, score per category,
beside the same model answering from the whole transcript.

    python -m bench.locomo.run --data /path/to/locomo10.zip --out locomo.json
        [--conversations N | --only conv-26,conv-30] [--sessions N]
        [--context build_context|memories_only|past_only|search (comma list) | full]
        [--no-full-context]
        [--top-k 20] [--max-chars 4000]
        [--answer-base-url URL --answer-model M --answer-api-key K]
        [--judge-base-url URL --judge-model M --judge-api-key K]
        [--types semantic,episodic] [--embedded] [--timeout 3600]

The data is the public LoCoMo set (non-commercial licence), in either layout
(`bench.locomo.dataset`): the repository's `data/locomo10.zip` or the `locomo10.json` list. Give
its path; it is never downloaded and never committed. `--data synthetic` runs the small
synthetic conversation shipped for the tests. `--sessions N` keeps each conversation's first N
sessions and only the questions whose evidence lies in them (a CPU run of one conversation's
first four sessions fits in an hour).

Every question is answered from memstream (`--context`: search results, `build_context`'s block,
that block without past messages, or without memories, or several of these as ways from the
same memories) and,
unless `--no-full-context`, from the whole transcript of the same sessions (the baseline), by
the same model with the same prompt; `--context full` answers only from the transcript and
starts no pipeline. The report gives, per category and for each way, F1, J (with
`--judge-model`), prompt tokens and seconds per question, and how much of the gold answer the
context held (`bench.locomo.evaluate`).

The pipeline: with `KAFKA_BOOTSTRAP_SERVERS` and `MONGODB_URI` set (and not `--embedded`), an
existing deployment whose workers are running (its own window and memory types apply); else the
embedded one is started (Tansu in memory, SecantusDB, every stage worker, and the local model
if no `OPENAI_BASE_URL` is configured — taken under the machine's model lock), with a window
that makes each LoCoMo session one snapshot and the memory types of `--types`.

With ``MEMSTREAM_LOCAL_LLM_REPEATABLE=true`` the local model evaluates every prompt whole, so
extraction gets the same answers whatever order the stages' requests reach it in, and two runs
of one commit extract the same memories (slower; the report says which:
`extraction.local_repeatable`).

The packaged local model reads 4,096 tokens at most: a whole-transcript answer of more than
about four LoCoMo sessions does not fit it (use `--sessions`, or an endpoint with a longer
context).
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
from bench.locomo.dataset import SYNTHETIC, Sample, first_sessions, load
from bench.locomo.evaluate import Options, evaluate, public_report
from bench.locomo.harness import LOCOMO_WINDOW
from bench.machine import machine
from memstream.config import Settings, load_settings


def _existing(environ: dict[str, str]) -> bool:
    return bool(environ.get("KAFKA_BOOTSTRAP_SERVERS") and environ.get("MONGODB_URI"))


@contextlib.contextmanager
def pipeline(args: argparse.Namespace, log_dir: Path) -> Iterator[tuple[Settings, str]]:
    """The settings of the pipeline to run against, and how it was obtained."""
    environ = dict(os.environ)
    if args.context == ("full",):
        yield from _answer_model_only(args, environ, log_dir)
        return
    if _existing(environ) and not args.embedded:
        yield load_settings(environ=environ), "existing deployment (its own window and types)"
        return
    from memstream.runtime.llm_choice import wants_local_llm
    from memstream.runtime.pipeline import running_pipeline

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


def _answer_model_only(
    args: argparse.Namespace, environ: dict[str, str], log_dir: Path
) -> Iterator[tuple[Settings, str]]:
    """`--context full`: no pipeline; the answer endpoint given, or configured, or else the
    packaged local model (under the machine's model lock)."""
    settings = load_settings(environ=environ)
    if args.answer_base_url or settings.llm.configured:
        yield settings, "none (full context only)"
        return
    from bench.locomo.harness import local_model

    with local_model("large", log_dir, repeatable=settings.llm.local_repeatable) as llm_environment:
        yield load_settings(environ={**environ, **llm_environment}), "none (full context only)"


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
    first, *also = args.context
    options = Options(
        context=first,
        also=tuple(also),
        full_context=not args.no_full_context,
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


def _contexts(value: str) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
    if chosen == ("full",) or (chosen and set(chosen) <= set(MEMSTREAM_CONTEXTS)):
        return chosen
    raise argparse.ArgumentTypeError(
        f"one or more of {', '.join(MEMSTREAM_CONTEXTS)} (comma list), or full alone"
    )


MEMSTREAM_CONTEXTS = ("search", "build_context", "memories_only", "past_only")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--data", required=True, help="locomo10.zip, locomo10.json, a directory, or 'synthetic'"
    )
    parser.add_argument("--conversations", type=int, default=0, help="only the first N (0: all)")
    parser.add_argument("--only", default="", help="only these conversations (conv-26,conv-30)")
    parser.add_argument(
        "--sessions",
        type=int,
        default=0,
        help="only each conversation's first N sessions and their questions (0: all)",
    )
    parser.add_argument(
        "--context",
        type=_contexts,
        default=("build_context",),
        help="search, build_context, memories_only (build_context without past messages), "
        "past_only (build_context without memories, 20 past messages offered), "
        "several as a comma list (answered from the same memories, the first is the "
        "headline), or full",
    )
    parser.add_argument(
        "--no-full-context",
        action="store_true",
        help="do not also answer from the whole transcript (the baseline)",
    )
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
    parser.add_argument(
        "--public-out",
        type=Path,
        help="also write the report without the data set's text (fit to commit)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    data = SYNTHETIC if args.data == "synthetic" else Path(args.data)
    samples = load(data)
    if args.only:
        wanted = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = set(wanted) - {sample.sample_id for sample in samples}
        if unknown:
            parser.error(f"--only: no conversation {', '.join(sorted(unknown))} in {data}")
        samples = [sample for sample in samples if sample.sample_id in wanted]
    if args.conversations:
        samples = samples[: args.conversations]
    samples = [first_sessions(sample, args.sessions) for sample in samples]
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
        "sessions_per_conversation": [len(sample.sessions) for sample in samples],
        "pipeline": how,
        "machine": machine(),
        **report,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n")
    if args.public_out is not None:
        public = json.dumps(public_report(report), indent=2, ensure_ascii=False, default=str)
        args.public_out.write_text(public + "\n")
    print(json.dumps(report["comparison"] or report["scores"], indent=2))
    print(f"written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
