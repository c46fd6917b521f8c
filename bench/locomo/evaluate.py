"""One LoCoMo evaluation: feed samples, wait for extraction, answer, score, report.

Used by the command line (`bench.locomo.run`) and the `locomo` benchmark suite
(`bench.suites.locomo`). Every question is answered by the same model with the same prompt
(`bench.locomo.answering`): from memstream (`Options.context`: search results or `build_context`'s
block; `Options.also` answers from further contexts of the same memories, each a way of its own,
`memstream:<context>`) and once from the whole transcript (`bench.locomo.transcript`, the
full-context baseline), unless `Options.full_context` is off or the context itself is "full" (then
no pipeline is needed). For each way the report gives, per category and overall: F1, J (with a
judge), prompt tokens and seconds per question, and how much of the gold answer the context shown
held (`gold_in_context`), so a miss can be told apart as extraction or retrieval (the answer was not
in the context) or answering (it was).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.locomo.answering import CountingChat, answer_messages, first_line, judge_messages
from bench.locomo.dataset import CATEGORIES, QA, SCORED_CATEGORIES, Sample
from bench.locomo.pipeline import ContextMode, feed, retrieve, wait_caught_up, with_retries
from bench.locomo.scoring import (
    Scored,
    answer_tokens,
    judge_label,
    locomo_f1,
    mem0_f1,
    scored,
    scored_gold,
    summarize,
)
from bench.locomo.transcript import full_transcript
from memstream.config import Settings
from memstream.sdk.client import MemoryClient

MEMSTREAM = "memstream"
FULL_CONTEXT = "full_context"


@dataclass(frozen=True)
class Options:
    context: ContextMode = "build_context"
    """The context memstream answers from by default: `build_context`'s block scored better
    than the search results on LoCoMo (BENCHMARKS.md, "LoCoMo") at fewer tokens."""
    also: tuple[ContextMode, ...] = ()
    """Further memstream contexts every question is answered from (the same memories)."""
    full_context: bool = True
    """Also answer every question from the whole transcript (the baseline of the same run)."""
    top_k: int = 20
    max_chars: int = 4_000
    user_prefix: str = "locomo-"
    catch_up_timeout: float = 1_800.0

    @property
    def ways(self) -> tuple[str, ...]:
        """The ways each question is answered, memstream's first."""
        if self.context == "full":
            return (FULL_CONTEXT,)
        ours = (MEMSTREAM, *(f"{MEMSTREAM}:{mode}" for mode in self.also))
        return (*ours, FULL_CONTEXT) if self.full_context else ours

    def mode_of(self, way: str) -> ContextMode:
        """The memstream context a way answers from."""
        return self.context if way == MEMSTREAM else way.partition(":")[2]  # type: ignore[return-value]


def gold_in_context(qa: QA, context: str) -> float:
    """The share of the gold answer's scored tokens (normalised and stemmed, as F1 counts
    them) that appear anywhere in the context shown: 1.0 when all of it was there to read."""
    gold = set(answer_tokens(scored_gold(qa)))
    if not gold:
        return 0.0
    return len(gold & set(answer_tokens(context))) / len(gold)


@dataclass
class Answerers:
    """The answer LLM of each way (same endpoint, counted apart) and the judge."""

    by_way: dict[str, CountingChat]
    judge: CountingChat | None


async def _answer(
    answerer: CountingChat,
    judge: CountingChat | None,
    sample: Sample,
    qa: QA,
    context: str,
) -> dict[str, Any]:
    started = time.perf_counter()
    reply = await answerer.complete(
        answer_messages(sample.speaker_a, sample.speaker_b, context, qa.question)
    )
    seconds = time.perf_counter() - started
    prompt_tokens = answerer.last_prompt_tokens
    answer = first_line(reply)
    judged = None
    if judge is not None:
        verdict = await judge.complete(
            judge_messages(qa.question, qa.answer, answer), json_object=True
        )
        judged = judge_label(verdict)
    return {
        "answer": answer,
        "f1": locomo_f1(answer, qa),
        "mem0_f1": mem0_f1(answer, qa.answer),
        "judged_correct": judged,
        "prompt_tokens": prompt_tokens,
        "seconds": round(seconds, 3),
        "gold_in_context": round(gold_in_context(qa, context), 4),
    }


async def _extracted(
    settings: Settings, sample: Sample, options: Options
) -> tuple[
    dict[str, Any], Callable[[QA, ContextMode], Awaitable[tuple[str, list[str]]]], MemoryClient
]:
    """Feed the sample, wait until it is extracted and projected; what was learned, and how to
    retrieve memstream's context for a question (through the returned client)."""
    user_id = f"{options.user_prefix}{sample.sample_id}"
    started = time.perf_counter()
    turns = await feed(settings, sample, user_id)
    fed = time.perf_counter() - started
    progress, waited = await asyncio.to_thread(
        wait_caught_up, settings, user_id, turns, timeout=options.catch_up_timeout
    )
    client = MemoryClient(settings)
    await client.__aenter__()
    memories = await with_retries(lambda: client.memories(user_id))
    usage = await with_retries(lambda: client.llm_usage(user_id))

    async def context_for(qa: QA, mode: ContextMode) -> tuple[str, list[str]]:
        return await with_retries(  # type: ignore[no-any-return]
            lambda: retrieve(
                client,
                user_id,
                qa.question,
                mode=mode,
                top_k=options.top_k,
                max_chars=options.max_chars,
            )
        )

    learned = {
        "user_id": user_id,
        "turns": turns,
        "memories": len(memories),
        "memory_texts": [str(m.get("text")) for m in memories],
        "memory_types": [str(m.get("memory_type")) for m in memories],
        "extraction": {"progress": asdict(progress), "llm_usage": usage},
        "seconds": {"feed": round(fed, 2), "catch_up": round(waited, 2)},
    }
    return learned, context_for, client


async def _evaluate_sample(
    settings: Settings, sample: Sample, answerers: Answerers, options: Options
) -> dict[str, Any]:
    ways = options.ways
    learned: dict[str, Any] = {"turns": sample.turn_count, "seconds": {}}
    client = None
    context_for = None
    if MEMSTREAM in ways:
        learned, context_for, client = await _extracted(settings, sample, options)
    transcript = full_transcript(sample)
    questions = []
    answering_started = time.perf_counter()
    try:
        for qa in scored(sample.qa):
            row: dict[str, Any] = {
                "question": qa.question,
                "category": qa.category,
                "gold": qa.answer,
                "evidence": list(qa.evidence),
            }
            for way in ways:
                ours = way != FULL_CONTEXT
                if ours:
                    assert context_for is not None
                    context, shown = await context_for(qa, options.mode_of(way))
                else:
                    context, shown = transcript, []
                answered = await _answer(
                    answerers.by_way[way], answerers.judge, sample, qa, context
                )
                if ours:
                    answered["context"] = shown
                row[way] = answered
            questions.append(row)
    finally:
        if client is not None:
            await client.__aexit__(None, None, None)
    learned["seconds"]["answer"] = round(time.perf_counter() - answering_started, 2)
    return {
        "sample_id": sample.sample_id,
        "sessions": len(sample.sessions),
        "questions_excluded_adversarial": sum(1 for qa in sample.qa if qa.adversarial),
        **learned,
        "questions": questions,
    }


DATASET_TEXT = ("question", "gold", "evidence", "answer", "context", "memory_texts")
"""Report fields that quote the data set or what was learned from it (its licence forbids
redistributing it): `public_report` leaves them out."""


def public_report(report: dict[str, Any]) -> dict[str, Any]:
    """The report without the data set's text (questions, answers, evidence, memories,
    contexts): scores, categories, tokens and seconds only, fit to commit."""

    def stripped(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: stripped(v) for k, v in value.items() if k not in DATASET_TEXT}
        if isinstance(value, list):
            return [stripped(item) for item in value]
        return value

    return stripped(report)  # type: ignore[no-any-return]


def extraction_totals(samples: Sequence[dict[str, Any]]) -> dict[str, int]:
    totals = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for sample in samples:
        for usage in (sample.get("extraction") or {}).get("llm_usage", {}).values():
            for name in totals:
                totals[name] += int(usage.get(name, 0))
    return totals


def way_summary(questions: Sequence[dict[str, Any]], way: str) -> dict[str, Any]:
    """Per category and overall: the scores (`summarize`), and the means per question of the
    prompt tokens, seconds and gold-in-context share, with how many questions had all of the
    gold answer in their context."""
    rows = [q for q in questions if way in q]
    summary = summarize(
        [
            Scored(q["category"], q[way]["f1"], q[way]["mem0_f1"], q[way]["judged_correct"])
            for q in rows
        ]
    )
    groups = {CATEGORIES[c]: [q for q in rows if q["category"] == c] for c in SCORED_CATEGORIES}
    groups["overall"] = list(rows)
    for name, chosen in groups.items():
        if name not in summary or not chosen:
            continue
        answers = [q[way] for q in chosen]
        summary[name].update(
            {
                "prompt_tokens_per_question": statistics.fmean(a["prompt_tokens"] for a in answers),
                "seconds_per_question": statistics.fmean(a["seconds"] for a in answers),
                "gold_in_context": statistics.fmean(a["gold_in_context"] for a in answers),
                "gold_fully_in_context": sum(1 for a in answers if a["gold_in_context"] >= 1.0),
            }
        )
    return summary


def _ratio(ours: dict[str, Any], baseline: dict[str, Any], key: str) -> float | None:
    if ours.get(key) is None or not baseline.get(key):
        return None
    return round(float(ours[key]) / float(baseline[key]), 4)


def comparison(scores: dict[str, dict[str, Any]], way: str = MEMSTREAM) -> list[dict[str, Any]]:
    """A memstream way's figures beside the full-context ones, per category and overall, with
    the ratios (memstream / full context) of F1 and of prompt tokens per question."""
    ours, full = scores.get(way), scores.get(FULL_CONTEXT)
    if ours is None or full is None:
        return []
    rows = []
    for name, block in ours.items():
        baseline = full.get(name)
        if baseline is None:
            continue

        rows.append(
            {
                "category": name,
                "questions": block["questions"],
                "memstream_f1": block["f1"],
                "full_context_f1": baseline["f1"],
                "f1_ratio": _ratio(block, baseline, "f1"),
                "memstream_j": block["j"],
                "full_context_j": baseline["j"],
                "memstream_prompt_tokens": block["prompt_tokens_per_question"],
                "full_context_prompt_tokens": baseline["prompt_tokens_per_question"],
                "prompt_tokens_ratio": _ratio(block, baseline, "prompt_tokens_per_question"),
                "memstream_seconds": block["seconds_per_question"],
                "full_context_seconds": baseline["seconds_per_question"],
                "memstream_gold_in_context": block["gold_in_context"],
                "full_context_gold_in_context": baseline["gold_in_context"],
            }
        )
    return rows


async def evaluate(
    settings: Settings,
    samples: Sequence[Sample],
    answerer: CountingChat,
    judge: CountingChat | None,
    options: Options,
) -> dict[str, Any]:
    """Every sample in turn (one user each); the report with per-category scores of each way.

    `report["scores"]` are the first way's (memstream's, unless the context is "full")."""
    started = time.perf_counter()
    ways = options.ways
    by_way = {ways[0]: answerer}
    for way in ways[1:]:
        by_way[way] = CountingChat(answerer.endpoint, max_tokens=answerer.max_tokens)
    answerers = Answerers(by_way, judge)
    try:
        results = [
            await _evaluate_sample(settings, sample, answerers, options) for sample in samples
        ]
    finally:
        for way in ways[1:]:
            await by_way[way].close()
    questions = [q for result in results for q in result["questions"]]
    scores = {way: way_summary(questions, way) for way in ways}
    return {
        "categories": {str(k): v for k, v in CATEGORIES.items()},
        "ways": list(ways),
        "scores": scores[ways[0]],
        "scores_by_way": scores,
        "comparison": comparison(scores),
        "comparison_by_way": {way: comparison(scores, way) for way in ways if way != FULL_CONTEXT},
        "options": asdict(options),
        "extraction": {
            "llm_model": settings.llm.model,
            "embedding": f"{settings.embedding.provider}:{settings.embedding.model or 'default'}",
            "memory_types": list(settings.memory.extraction.enabled),
            "window_max_messages": settings.window.max_messages,
            "rerank_past_messages": settings.memory.rerank_past_messages,
            "local_repeatable": settings.llm.local_repeatable,
            **extraction_totals(results),
        },
        "answer_llm": {way: chat.usage() for way, chat in by_way.items()},
        "judge_llm": judge.usage() if judge is not None else None,
        "seconds": round(time.perf_counter() - started, 2),
        "samples": results,
    }
