"""Labelled evaluation of the extraction prompts against an OpenAI-compatible endpoint.

    .venv/bin/python bench/extraction_eval/run.py --local small            # packaged 0.5B model
    .venv/bin/python bench/extraction_eval/run.py --local large            # packaged 1.5B model
    .venv/bin/python bench/extraction_eval/run.py --base-url URL --model NAME [--api-key KEY]
        [--type semantic|episodic|procedural|taxonomic|all|custom|<a custom type>] [--cases FILE]
        [--case ID ...]
        [--tag TAG ...] [--skip-tag TAG ...] [--out report.json] [--timeout 900] [--no-warmup]
    .venv/bin/python bench/extraction_eval/run.py --rescore report.json [--case/--tag/--skip-tag]

Each memory type has its labelled conversations in ``cases-<type>.json`` beside this script
(``--type all`` runs the four types in turn against one server; ``--type`` defaults to
semantic). Each conversation is normalised (`handlers.messages.normalize_messages`), wrapped in
one `SnapshotPromoted` and run through `extract(extractor_for(type), snapshot, llm,
attempts=3)` exactly as the extraction handler does (validation, retries with the reason,
re-attribution). The scores are defined in `bench.extraction_eval.scoring`; they are printed as
a table and, with ``--out``, saved as JSON with every case's raw LLM answers and extracted
memories (``{type}`` in the path is replaced by the memory type, one file per type).
``--rescore`` recomputes the scores of a saved report against the current labels, for any
subset of its cases, without calling a model; with ``--reparse`` the saved LLM answers are run
through today's extraction handler first (its parsing and filters), so a filter can be measured
without the model.

With ``--local small|large`` the script starts the packaged llama.cpp server itself
(`memstream.runtime.local.llm.start_local_llm`) and stops it afterwards. Without ``--base-url`` the
environment's ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``MEMSTREAM_LLM_MODEL`` are used.
One untimed warm-up request is sent first (the model's first request pays for loading).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.extraction_eval.scoring import (
    Case,
    CaseRun,
    CaseScore,
    ExtractedMemory,
    Summary,
    format_columns,
    format_table,
    parse_cases,
    score_case,
    summarize,
    summary_rows,
)
from bench.machine import machine
from events.memories import MEMORY_TYPES
from events.snapshots import SnapshotPromoted, SnapshotTurn, snapshot_id
from handlers.extraction.base import extract
from handlers.extraction.custom import CustomTypeDeclaration
from handlers.extraction.registry import extractor_for
from handlers.messages import normalize_messages
from handlers.ports import ChatAnswer, ChatModel, LLMUnavailable
from memstream.providers.clients import OpenAIChatModel


def cases_file(memory_type: str) -> Path:
    """The labelled cases of one memory type, beside this script."""
    return Path(__file__).with_name(f"cases-{memory_type}.json")


DEFAULT_CASES = cases_file("semantic")
CUSTOM_TYPES = Path(__file__).with_name("custom-types.yaml")
"""The custom memory types held to labelled cases (`--type custom`), declared as a project
declares them (`memory.custom_types`)."""


def custom_types(path: Path = CUSTOM_TYPES) -> dict[str, CustomTypeDeclaration]:
    """The custom types declared in `path`, each checked as the settings check it."""
    declared = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {name: CustomTypeDeclaration.model_validate(value) for name, value in declared.items()}


USER_ID = "eval-user"
CLOCK = datetime(2026, 1, 15, 9, 0, tzinfo=UTC)


@dataclass
class RecordingChatModel:
    """Passes requests to `inner` and keeps every raw answer (for failure reports) and the
    tokens the endpoint counted."""

    inner: ChatModel
    answers: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        answer = await self.inner.complete_json(messages)
        self.answers.append(answer.text)
        self.prompt_tokens += answer.prompt_tokens
        self.completion_tokens += answer.completion_tokens
        return answer


@dataclass(frozen=True)
class CaseReport:
    """One case's run, its raw answers and its score."""

    run: CaseRun
    answers: tuple[str, ...]
    score: CaseScore
    prompt_tokens: int = 0
    completion_tokens: int = 0


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
        extractor = extractor_for(case.memory_type, custom_types())
        outcome = await extract(extractor, snapshot, recorder, attempts=attempts)
        memories = tuple(
            ExtractedMemory(
                subject=m.subject,
                owner=m.owner,
                text=m.text,
                category=m.category,
                attributes=dict(m.attributes),
            )
            for m in outcome.memories
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
    return CaseReport(
        run=run,
        answers=tuple(recorder.answers),
        score=score_case(case, run),
        prompt_tokens=recorder.prompt_tokens,
        completion_tokens=recorder.completion_tokens,
    )


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


async def evaluate_types(
    selected: dict[str, list[Case]], llm: ChatModel, *, attempts: int, warmup: bool
) -> dict[str, list[CaseReport]]:
    """Every selected type's cases in turn, against one model (one event loop)."""
    results: dict[str, list[CaseReport]] = {}
    for memory_type, cases in selected.items():
        print(f"\n== {memory_type}: {len(cases)} cases", flush=True)
        results[memory_type] = await evaluate(cases, llm, attempts=attempts, warmup=warmup)
        warmup = False
    return results


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
        if memory.attributes:
            print(f"      {json.dumps(memory.attributes, ensure_ascii=False)}", flush=True)
    if run.failure:
        print(f"    ! {run.failure}", flush=True)


def report_json(
    *,
    memory_type: str,
    model: str,
    base_url: str | None,
    reports: Sequence[CaseReport],
    summary: Summary,
) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["bench/extraction_eval/run.py", *sys.argv[1:]]),
        "memory_type": memory_type,
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
                "prompt_tokens": report.prompt_tokens,
                "completion_tokens": report.completion_tokens,
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
    parser.add_argument(
        "--type",
        choices=(*MEMORY_TYPES, *custom_types(), "all", "custom"),
        default="semantic",
        help="memory type to evaluate (default semantic; all: the built-in ones; custom: those "
        "of custom-types.yaml)",
    )
    parser.add_argument("--cases", type=Path, help="labelled cases file (one --type only)")
    parser.add_argument("--case", action="append", default=[], help="only this case id")
    parser.add_argument("--tag", action="append", default=[], help="only cases with this tag")
    parser.add_argument("--skip-tag", action="append", default=[], help="leave out this tag")
    parser.add_argument("--out", help="write the JSON report here ({type}: the memory type)")
    parser.add_argument(
        "--rescore",
        type=Path,
        nargs="+",
        help="score saved reports again (no model), one column each",
    )
    parser.add_argument(
        "--reparse",
        action="store_true",
        help="with --rescore: run the saved LLM answers through today's extraction handler "
        "(its parsing and filters) instead of scoring the saved memories",
    )
    parser.add_argument("--attempts", type=int, default=3, help="LLM attempts per snapshot")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per LLM request")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up")
    args = parser.parse_args(argv)
    if args.local and (args.base_url or args.model):
        parser.error("--local starts its own server: do not also give --base-url/--model")
    if args.cases and args.type in ("all", "custom"):
        parser.error("--cases holds the cases of one memory type: give --type too")
    if args.out and args.type in ("all", "custom") and "{type}" not in args.out:
        parser.error("--type all writes one report per type: put {type} in the --out path")
    return args


def load_cases(
    path: Path,
    only: Sequence[str] = (),
    *,
    memory_type: str = "semantic",
    tags: Sequence[str] = (),
    skip_tags: Sequence[str] = (),
) -> list[Case]:
    """The cases of one type's file, narrowed to the given ids and tags."""
    cases = parse_cases(json.loads(path.read_text(encoding="utf-8")), memory_type)
    if only:
        unknown = sorted(set(only) - {case.id for case in cases})
        if unknown:
            raise SystemExit(f"unknown case ids: {', '.join(unknown)}")
        cases = [case for case in cases if case.id in only]
    if tags:
        cases = [case for case in cases if set(tags) & set(case.tags)]
    return [case for case in cases if not set(skip_tags) & set(case.tags)]


def selected_cases(args: argparse.Namespace) -> dict[str, list[Case]]:
    """The cases to run, per memory type (case ids of other types are not an error)."""
    groups = {"all": MEMORY_TYPES, "custom": tuple(custom_types())}
    types = groups.get(args.type, (args.type,))
    selected: dict[str, list[Case]] = {}
    for memory_type in types:
        path = args.cases or cases_file(memory_type)
        cases = load_cases(path, memory_type=memory_type, tags=args.tag, skip_tags=args.skip_tag)
        if args.case:
            cases = [case for case in cases if case.id in args.case]
        if cases:
            selected[memory_type] = cases
    known = {case.id for cases in selected.values() for case in cases}
    unknown = sorted(set(args.case) - known)
    if unknown:
        raise SystemExit(f"unknown case ids: {', '.join(unknown)}")
    return selected


def run_against(
    args: argparse.Namespace,
    selected: dict[str, list[Case]],
    base_url: str | None,
    model: str,
) -> int:
    llm = OpenAIChatModel(
        base_url=base_url,
        api_key=args.api_key or os.environ.get("OPENAI_API_KEY"),
        model=model,
        timeout=args.timeout,
        max_tokens=args.max_tokens,
    )
    total = sum(len(cases) for cases in selected.values())
    print(f"model {model} at {base_url or 'the default OpenAI endpoint'}: {total} cases")
    results = asyncio.run(
        evaluate_types(selected, llm, attempts=args.attempts, warmup=not args.no_warmup)
    )
    for memory_type, reports in results.items():
        cases = selected[memory_type]
        print(f"\n== {memory_type}: {len(cases)} cases")
        summary = summarize([r.score for r in reports], [r.run for r in reports])
        print()
        print(format_table(summary_rows(summary)))
        _print_problems(reports, {case.id: case for case in cases})
        if args.out:
            out = Path(args.out.replace("{type}", memory_type))
            document = report_json(
                memory_type=memory_type,
                model=model,
                base_url=base_url,
                reports=reports,
                summary=summary,
            )
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", "utf-8")
            print(f"\nreport written to {out}")
    return 0


def rescore(args: argparse.Namespace) -> int:
    """Score saved reports' memories again against the current labels (no model): one table
    with a column per report (its memory type), for the cases selected by id and tag."""
    columns: list[tuple[str, list[tuple[str, str]]]] = []
    for path in args.rescore:
        document = json.loads(path.read_text(encoding="utf-8"))
        memory_type = document.get("memory_type", "semantic")
        cases = load_cases(
            args.cases or cases_file(memory_type),
            memory_type=memory_type,
            tags=args.tag,
            skip_tags=args.skip_tag,
        )
        if args.case:
            cases = [case for case in cases if case.id in args.case]
        saved = {entry["id"]: entry for entry in document["cases"]}
        missing = sorted(case.id for case in cases if case.id not in saved)
        if missing:
            raise SystemExit(f"{path}: the report has no run of: {', '.join(missing)}")
        runs = {
            case.id: replayed(saved[case.id], case)
            if args.reparse
            else run_from_report(saved[case.id])
            for case in cases
        }
        scores = [score_case(case, runs[case.id]) for case in cases]
        summary = summarize(scores, [runs[case.id] for case in cases])
        print(f"{path}: {memory_type}, {len(cases)} cases, model {document.get('model')}")
        columns.append((f"{memory_type} ({len(cases)} cases)", summary_rows(summary)))
    print()
    print(format_columns(columns))
    return 0


class ReplayedAnswers:
    """A `ChatModel` that answers with a saved run's answers, in order."""

    def __init__(self, answers: Sequence[str]) -> None:
        self._answers = list(answers)

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        if not self._answers:
            raise LLMUnavailable("the saved run has no more answers")
        return ChatAnswer(self._answers.pop(0), "replayed")


def replayed(entry: dict[str, Any], case: Case) -> CaseRun:
    """A case's saved answers run through today's extraction handler (`--reparse`)."""
    answers = entry.get("answers") or []
    report = asyncio.run(run_case(case, ReplayedAnswers(answers), attempts=max(1, len(answers))))
    return report.run


def run_from_report(entry: dict[str, Any]) -> CaseRun:
    """A case's run as a saved report holds it."""
    return CaseRun(
        case_id=entry["id"],
        memories=tuple(
            ExtractedMemory(
                subject=m["subject"],
                owner=m["owner"],
                text=m["text"],
                category=m.get("category"),
                attributes=m.get("attributes", {}),
            )
            for m in entry["memories"]
        ),
        seconds=entry["seconds"],
        attempts=entry["attempts"],
        failure=entry["failure"],
    )


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
    if args.rescore:
        return rescore(args)
    selected = selected_cases(args)
    if args.local:
        from memstream.runtime.local.llm import start_local_llm
        from memstream.runtime.local.weights import MODELS

        print(f"starting the local {args.local} model …", file=sys.stderr, flush=True)
        server = start_local_llm(MODELS[args.local], startup_timeout=300.0)
        try:
            return run_against(args, selected, server.base_url, server.model)
        finally:
            server.stop()
    model = args.model or os.environ.get("MEMSTREAM_LLM_MODEL")
    if not model:
        raise SystemExit("give --model (or set MEMSTREAM_LLM_MODEL), or use --local small|large")
    return run_against(args, selected, args.base_url or os.environ.get("OPENAI_BASE_URL"), model)


if __name__ == "__main__":
    raise SystemExit(main())
