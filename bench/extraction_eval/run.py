"""Labelled evaluation of the semantic extraction prompt against an OpenAI-compatible endpoint.

    .venv/bin/python bench/extraction_eval/run.py --local small            # packaged 0.5B model
    .venv/bin/python bench/extraction_eval/run.py --local large            # packaged 1.5B model
    .venv/bin/python bench/extraction_eval/run.py --base-url URL --model NAME [--api-key KEY]
        [--cases FILE] [--case ID ...] [--out report.json] [--timeout 900] [--no-warmup]

Each labelled conversation in the cases file (default: ``cases.json`` beside this script) is
normalised (`handlers.messages.normalize_messages`), wrapped in one `SnapshotPromoted` and run
through `extract(SemanticExtractor(), snapshot, llm, attempts=3)` exactly as the semantic
extraction handler does (validation, retries with the reason, re-attribution). The scores are
defined in `bench.extraction_eval.scoring`; they are printed as a table and, with ``--out``,
saved as JSON with every case's raw LLM answers and extracted memories.

With ``--local small|large`` the script starts the packaged llama.cpp server itself
(`memstream.local.llm.start_local_llm`) and stops it afterwards. Without ``--base-url`` the
environment's ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``MEMSTREAM_LLM_MODEL`` are used.
One untimed warm-up request is sent first (the model's first request pays for loading).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.extraction_eval.scoring import (
    Case,
    CaseRun,
    CaseScore,
    ExtractedMemory,
    Summary,
    format_table,
    parse_cases,
    score_case,
    summarize,
    summary_rows,
)
from events.snapshots import SnapshotPromoted, SnapshotTurn, snapshot_id
from handlers.extraction.base import extract
from handlers.extraction.semantic import SemanticExtractor
from handlers.messages import normalize_messages
from handlers.ports import ChatAnswer, ChatModel, LLMUnavailable
from memstream.providers import OpenAIChatModel

DEFAULT_CASES = Path(__file__).with_name("cases.json")
USER_ID = "eval-user"
CLOCK = datetime(2026, 1, 15, 9, 0, tzinfo=UTC)


@dataclass
class RecordingChatModel:
    """Passes requests to `inner` and keeps every raw answer (for failure reports)."""

    inner: ChatModel
    answers: list[str] = field(default_factory=list)

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        answer = await self.inner.complete_json(messages)
        self.answers.append(answer.text)
        return answer


@dataclass(frozen=True)
class CaseReport:
    """One case's run, its raw answers and its score."""

    run: CaseRun
    answers: tuple[str, ...]
    score: CaseScore


def snapshot_for(case: Case) -> SnapshotPromoted:
    """The case's messages, normalised, as one snapshot (session = case id)."""
    messages = normalize_messages(case.messages)
    turns = tuple(
        SnapshotTurn(
            turn_id=f"{case.id}-{index}",
            role=message.role,
            name=message.name,
            tool_name=message.tool_name,
            content=message.content,
            occurred_at=CLOCK + timedelta(seconds=index),
        )
        for index, message in enumerate(messages)
    )
    return SnapshotPromoted(
        event_id=snapshot_id(USER_ID, case.id, [turn.turn_id for turn in turns]),
        occurred_at=CLOCK + timedelta(seconds=len(turns)),
        user_id=USER_ID,
        session_id=case.id,
        seq=0,
        reason="flush",
        turns=turns,
    )


async def run_case(case: Case, llm: ChatModel, attempts: int) -> CaseReport:
    """Extract from one case, timed; an unreachable LLM is recorded as a failure."""
    recorder = RecordingChatModel(llm)
    snapshot = snapshot_for(case)
    started = time.perf_counter()
    try:
        outcome = await extract(SemanticExtractor(), snapshot, recorder, attempts=attempts)
        memories = tuple(
            ExtractedMemory(subject=m.subject, owner=m.owner, text=m.text) for m in outcome.memories
        )
        run = CaseRun(
            case_id=case.id,
            memories=memories,
            seconds=time.perf_counter() - started,
            attempts=outcome.attempts,
            failure=outcome.failure,
        )
    except LLMUnavailable as exc:
        run = CaseRun(
            case_id=case.id,
            memories=(),
            seconds=time.perf_counter() - started,
            attempts=len(recorder.answers) + 1,
            failure=f"LLM unavailable: {exc}",
        )
    return CaseReport(run=run, answers=tuple(recorder.answers), score=score_case(case, run))


async def warm_up(llm: ChatModel) -> None:
    """One untimed request, so the first case does not pay for loading the model."""
    await llm.complete_json(
        [{"role": "user", "content": 'Answer with the JSON object {"ok": true}.'}]
    )


async def evaluate(
    cases: Sequence[Case], llm: ChatModel, *, attempts: int, warmup: bool
) -> list[CaseReport]:
    if warmup:
        await warm_up(llm)
    reports = []
    for case in cases:
        report = await run_case(case, llm, attempts)
        reports.append(report)
        _print_case(report)
    return reports


def _print_case(report: CaseReport) -> None:
    run, score = report.run, report.score
    status = "FAILED" if run.failure else "ok"
    print(
        f"{run.case_id:<26} {status:<6} {run.seconds:6.1f} s  attempts={run.attempts}  "
        f"recall={score.recalled}/{score.expected}  violations={len(score.violations)}  "
        f"extras={len(score.extras)}",
        flush=True,
    )
    for memory in run.memories:
        print(f"    - [{memory.subject} / {memory.owner}] {memory.text}", flush=True)
    if run.failure:
        print(f"    ! {run.failure}", flush=True)


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
    }


def report_json(
    *, model: str, base_url: str | None, reports: Sequence[CaseReport], summary: Summary
) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": model,
        "base_url": base_url,
        "machine": machine(),
        "summary": asdict(summary),
        "cases": [
            {
                "id": report.run.case_id,
                "seconds": round(report.run.seconds, 3),
                "attempts": report.run.attempts,
                "failure": report.run.failure,
                "answers": list(report.answers),
                "memories": [asdict(memory) for memory in report.run.memories],
                "score": asdict(report.score),
            }
            for report in reports
        ],
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--base-url", help="OpenAI-compatible base URL (default $OPENAI_BASE_URL)")
    parser.add_argument("--model", help="model name (default $MEMSTREAM_LLM_MODEL)")
    parser.add_argument("--api-key", help="API key (default $OPENAI_API_KEY)")
    parser.add_argument(
        "--local", choices=("small", "large"), help="start the packaged llama.cpp model"
    )
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES, help="labelled cases file")
    parser.add_argument("--case", action="append", default=[], help="only this case id")
    parser.add_argument("--out", type=Path, help="write the JSON report here")
    parser.add_argument("--attempts", type=int, default=3, help="LLM attempts per snapshot")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per LLM request")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up")
    args = parser.parse_args(argv)
    if args.local and (args.base_url or args.model):
        parser.error("--local starts its own server: do not also give --base-url/--model")
    return args


def load_cases(path: Path, only: Sequence[str]) -> list[Case]:
    cases = parse_cases(json.loads(path.read_text(encoding="utf-8")))
    if only:
        unknown = sorted(set(only) - {case.id for case in cases})
        if unknown:
            raise SystemExit(f"unknown case ids: {', '.join(unknown)}")
        cases = [case for case in cases if case.id in only]
    return cases


def run_against(
    args: argparse.Namespace, cases: Sequence[Case], base_url: str | None, model: str
) -> int:
    llm = OpenAIChatModel(
        base_url=base_url,
        api_key=args.api_key or os.environ.get("OPENAI_API_KEY"),
        model=model,
        timeout=args.timeout,
        max_tokens=args.max_tokens,
    )
    print(f"model {model} at {base_url or 'the default OpenAI endpoint'}: {len(cases)} cases")
    reports = asyncio.run(evaluate(cases, llm, attempts=args.attempts, warmup=not args.no_warmup))
    by_id = {case.id: case for case in cases}
    summary = summarize([r.score for r in reports], [r.run for r in reports])
    print()
    print(format_table(summary_rows(summary)))
    _print_problems(reports, by_id)
    if args.out:
        document = report_json(model=model, base_url=base_url, reports=reports, summary=summary)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(document, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
        )
        print(f"\nreport written to {args.out}")
    return 0


def _print_problems(reports: Sequence[CaseReport], cases: dict[str, Case]) -> None:
    lines: list[str] = []
    for report in reports:
        score = report.score
        for fact in score.missed:
            lines.append(f"{score.case_id}: missed [{fact.subject}] {list(fact.keywords)}")
        for fact, memory in score.violations:
            lines.append(
                f"{score.case_id}: FORBIDDEN [{fact.subject}] {list(fact.keywords)} <- "
                f"[{memory.subject}/{memory.owner}] {memory.text}"
            )
        for memory in score.misattributed:
            lines.append(
                f"{score.case_id}: misattributed [{memory.subject}/{memory.owner}] {memory.text}"
            )
        for memory in score.wrong_language:
            language = cases[score.case_id].language
            lines.append(f"{score.case_id}: not in {language}: {memory.text}")
        for memory in score.extras:
            lines.append(f"{score.case_id}: extra [{memory.subject}/{memory.owner}] {memory.text}")
        if report.run.failure:
            last = report.answers[-1][:300] if report.answers else ""
            lines.append(f"{score.case_id}: FAILED {report.run.failure}; last answer: {last!r}")
    if lines:
        print("\nproblems:")
        print("\n".join(f"  {line}" for line in lines))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cases = load_cases(args.cases, args.case)
    if args.local:
        from memstream.local.llm import MODELS, start_local_llm

        print(f"starting the local {args.local} model …", file=sys.stderr, flush=True)
        server = start_local_llm(MODELS[args.local], startup_timeout=300.0)
        try:
            return run_against(args, cases, server.base_url, server.model)
        finally:
            server.stop()
    model = args.model or os.environ.get("MEMSTREAM_LLM_MODEL")
    if not model:
        raise SystemExit("give --model (or set MEMSTREAM_LLM_MODEL), or use --local small|large")
    return run_against(args, cases, args.base_url or os.environ.get("OPENAI_BASE_URL"), model)


if __name__ == "__main__":
    raise SystemExit(main())
