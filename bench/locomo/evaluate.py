"""One LoCoMo evaluation: feed samples, wait for extraction, answer, score, report.

Used by the command line (`bench.locomo.run`) and the `locomo` benchmark suite
(`bench.suites.locomo`). The report names the models, counts every LLM call (extraction, as
recorded on the snapshots; answering and judging, as counted here) and times each phase.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.locomo.answering import CountingChat, answer_messages, first_line, judge_messages
from bench.locomo.dataset import CATEGORIES, Sample
from bench.locomo.pipeline import ContextMode, feed, retrieve, wait_caught_up, with_retries
from bench.locomo.scoring import Scored, judge_label, locomo_f1, mem0_f1, scored, summarize
from memstream.client import MemoryClient
from memstream.config import Settings


@dataclass(frozen=True)
class Options:
    context: ContextMode = "search"
    top_k: int = 20
    max_chars: int = 4_000
    user_prefix: str = "locomo-"
    catch_up_timeout: float = 1_800.0


async def _evaluate_sample(
    settings: Settings,
    sample: Sample,
    answerer: CountingChat,
    judge: CountingChat | None,
    options: Options,
) -> dict[str, Any]:
    user_id = f"{options.user_prefix}{sample.sample_id}"
    started = time.perf_counter()
    turns = await feed(settings, sample, user_id)
    fed = time.perf_counter() - started
    progress, waited = await asyncio.to_thread(
        wait_caught_up, settings, user_id, turns, timeout=options.catch_up_timeout
    )
    questions = []
    answering_started = time.perf_counter()
    async with MemoryClient(settings) as client:
        memories = await with_retries(lambda: client.memories(user_id))
        usage = await with_retries(lambda: client.llm_usage(user_id))
        for qa in scored(sample.qa):
            context, shown = await with_retries(
                lambda qa=qa: retrieve(
                    client,
                    user_id,
                    qa.question,
                    mode=options.context,
                    top_k=options.top_k,
                    max_chars=options.max_chars,
                )
            )
            reply = await answerer.complete(
                answer_messages(sample.speaker_a, sample.speaker_b, context, qa.question)
            )
            answer = first_line(reply)
            judged = None
            if judge is not None:
                verdict = await judge.complete(
                    judge_messages(qa.question, qa.answer, answer), json_object=True
                )
                judged = judge_label(verdict)
            questions.append(
                {
                    "question": qa.question,
                    "category": qa.category,
                    "gold": qa.answer,
                    "evidence": list(qa.evidence),
                    "answer": answer,
                    "f1": locomo_f1(answer, qa),
                    "mem0_f1": mem0_f1(answer, qa.answer),
                    "judged_correct": judged,
                    "context": shown,
                }
            )
    return {
        "sample_id": sample.sample_id,
        "user_id": user_id,
        "sessions": len(sample.sessions),
        "turns": turns,
        "questions_excluded_adversarial": sum(1 for qa in sample.qa if qa.adversarial),
        "memories": len(memories),
        "extraction": {"progress": asdict(progress), "llm_usage": usage},
        "seconds": {
            "feed": round(fed, 2),
            "catch_up": round(waited, 2),
            "answer": round(time.perf_counter() - answering_started, 2),
        },
        "questions": questions,
    }


def extraction_totals(samples: Sequence[dict[str, Any]]) -> dict[str, int]:
    totals = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for sample in samples:
        for usage in sample["extraction"]["llm_usage"].values():
            for name in totals:
                totals[name] += int(usage.get(name, 0))
    return totals


async def evaluate(
    settings: Settings,
    samples: Sequence[Sample],
    answerer: CountingChat,
    judge: CountingChat | None,
    options: Options,
) -> dict[str, Any]:
    """Every sample in turn (one user each); the report with per-category scores."""
    started = time.perf_counter()
    results = [
        await _evaluate_sample(settings, sample, answerer, judge, options) for sample in samples
    ]
    rows = [
        Scored(q["category"], q["f1"], q["mem0_f1"], q["judged_correct"])
        for result in results
        for q in result["questions"]
    ]
    return {
        "categories": {str(k): v for k, v in CATEGORIES.items()},
        "scores": summarize(rows),
        "options": asdict(options),
        "extraction": {
            "llm_model": settings.llm.model,
            "embedding": f"{settings.embedding.provider}:{settings.embedding.model or 'default'}",
            "memory_types": list(settings.memory.extraction.enabled),
            "window_max_messages": settings.window.max_messages,
            **extraction_totals(results),
        },
        "answer_llm": answerer.usage(),
        "judge_llm": judge.usage() if judge is not None else None,
        "seconds": round(time.perf_counter() - started, 2),
        "samples": results,
    }
