"""LLM cost: chat calls and prompt + completion tokens per 100 turns, ours vs a per-message
pipeline of the mem0 kind, fed the same conversation and counted at the same kind of server.

    python -m bench llm_cost [--quick] [--brokers apache,tansu]

The conversation (`bench.cost_conversation`: 6 sessions, 124 turns, English and Chinese, facts
repeated and changed across sessions) goes
- through our real pipeline on each broker (stage processes, default window of 20 turns, the
  four memory types enabled, reconciliation with the local embedder and its default thresholds),
  each session flushed at its end as an application would;
- through `bench.per_message_baseline` (one extraction call per message pair, one update call
  when it found facts).
Each side talks to its own scripted OpenAI-compatible server (`tests.support.scripted_llm`) that
answers from the conversation's annotations and counts tokens with the packaged Qwen2.5
tokenizer and chat template (`bench.tokens`). The counts are deterministic, so one run of each
suffices; the quick profile runs the same conversation, through our pipeline on the first broker
only.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
import uuid
from collections import Counter
from typing import Any, cast

import openai

from bench import per_message_baseline as baseline
from bench.core import Aim, BenchContext, Figure, SuiteResult
from bench.cost_answers import ScriptedMemoryModel, update_decisions
from bench.cost_conversation import SESSIONS, USER_ID, all_exchanges
from bench.cost_conversation import turn_count as conversation_turns
from bench.tokens import TokenCounter, load_token_counter
from tests.support.extraction_requests import OPENINGS
from tests.support.pipeline import PipelineHarness
from tests.support.reconcile_requests import is_reconciliation
from tests.support.scripted_llm import ScriptedLLM

TYPES = ("semantic", "episodic", "procedural", "taxonomic")
WINDOW = 20
"""The default window (`window.max_messages`)."""


def scripted_model() -> ScriptedMemoryModel:
    model: ScriptedMemoryModel

    def update(request: dict[str, Any]) -> dict[str, Any]:
        shown, facts = baseline.shown_in_update(request)
        return update_decisions(model.facts_by_statement, shown, facts)

    model = ScriptedMemoryModel(all_exchanges(), baseline.request_kind, baseline.new_part, update)
    return model


def kind_of(request: dict[str, Any]) -> str:
    """What a chat request was for, from its first message."""
    found = baseline.request_kind(request)
    if found:
        return f"baseline-{found}"
    first = str((request.get("messages") or [{}])[0].get("content", ""))
    if is_reconciliation(first):
        return "reconcile"
    for memory_type, opening in OPENINGS.items():
        if first.startswith(opening):
            return f"extract-{memory_type}"
    return "other"


def tally(usage: list[tuple[dict[str, Any], dict[str, int]]], turns: int) -> dict[str, Any]:
    """Calls and tokens, in total, per 100 turns and by kind of request."""
    by_kind: dict[str, Counter[str]] = {}
    for request, counted in usage:
        kind = by_kind.setdefault(kind_of(request), Counter())
        kind["calls"] += 1
        kind["prompt_tokens"] += counted["prompt_tokens"]
        kind["completion_tokens"] += counted["completion_tokens"]
    total: Counter[str] = sum(by_kind.values(), Counter())
    tokens = total["prompt_tokens"] + total["completion_tokens"]
    return {
        "calls": total["calls"],
        "prompt_tokens": total["prompt_tokens"],
        "completion_tokens": total["completion_tokens"],
        "calls_per_100_turns": total["calls"] * 100 / turns,
        "tokens_per_100_turns": tokens * 100 / turns,
        "by_kind": {name: dict(counts) for name, counts in sorted(by_kind.items())},
    }


def run_baseline(counter: TokenCounter) -> dict[str, Any]:
    from memstream.providers.local_embedder import load_local_embedder

    embedder = load_local_embedder()
    with ScriptedLLM(default=scripted_model(), token_counter=counter) as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="bench", max_retries=0)

        def chat(messages: list[dict[str, str]]) -> str:
            answer = client.chat.completions.create(
                model=llm.model,
                messages=cast(Any, messages),
                response_format={"type": "json_object"},
            )
            return answer.choices[0].message.content or ""

        started = time.perf_counter()
        store = baseline.Store(embedder.embed)
        events = baseline.run([s.messages() for s in SESSIONS], chat, store)
        seconds = time.perf_counter() - started
        result = tally(llm.chat_usage, conversation_turns())
    result.update(events=events, memories=len(store.memories), seconds=seconds)
    return result


def expected_snapshots() -> int:
    return sum(math.ceil(2 * len(s.exchanges) / WINDOW) for s in SESSIONS)


def run_ours(context: BenchContext, kind: str, counter: TokenCounter) -> dict[str, Any]:
    broker: Any = context.broker(kind)  # type: ignore[arg-type]
    broker.flavour = kind
    run_id = uuid.uuid4().hex[:10]
    with ScriptedLLM(default=scripted_model(), token_counter=counter) as llm:
        harness = PipelineHarness(
            broker=broker,
            mongo_uri=context.mongo().uri,
            llm=llm,
            run_id=run_id,
            log_dir=context.workdir / f"llm_cost-{kind}-{run_id}",
            environment={
                "MEMSTREAM_MAX_MESSAGES": str(WINDOW),
                "MEMSTREAM_IDLE_TIMEOUT": "300",
                "MEMSTREAM_ENABLED_EXTRACTIONS": ",".join(TYPES),
                "MEMSTREAM_EMBEDDING_PROVIDER": "local",
            },
        )
        harness.start()
        try:
            started = time.perf_counter()
            asyncio.run(_feed(harness))
            expected = expected_snapshots()
            documents = _wait_for_extractions(harness, expected, timeout=240)
            seconds = time.perf_counter() - started
            result = tally(llm.chat_usage, conversation_turns())
            memories = harness.memories()
        except BaseException:
            print(harness.log_tails(), file=sys.stderr)
            raise
        finally:
            harness.stop()
    failures = [
        (doc.get("snapshot_id"), t, slot.get("failure"))
        for doc in documents
        for t, slot in (doc.get("extractions") or {}).items()
        if slot.get("failure")
    ]
    current = [m for m in memories if not m.get("superseded_by")]
    result.update(
        snapshots=len(documents),
        seconds=seconds,
        memories=len(memories),
        memories_by_type=dict(Counter(str(m.get("memory_type")) for m in current)),
        versions=dict(Counter(int(m.get("version", 1)) for m in memories)),
        failures=failures,
        recorded_usage=_recorded_usage(documents),
    )
    return result


async def _feed(harness: PipelineHarness) -> None:
    from memstream.sdk.client import MemoryClient

    async with MemoryClient(harness.settings) as client:
        for session in SESSIONS:
            messages = session.messages()
            for start in range(0, len(messages), 2):  # one exchange at a time, as it happens
                await client.record(USER_ID, session.session_id, messages[start : start + 2])
            await client.flush(USER_ID, session.session_id)


def _wait_for_extractions(
    harness: PipelineHarness, expected: int, timeout: float
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            documents = harness.snapshots(user_id=USER_ID)
        except Exception:  # SecantusDB (beta) answers "internal error" under load: poll again
            documents = []
        done = [d for d in documents if set(TYPES) <= set(d.get("extractions") or {})]
        if len(documents) >= expected and len(done) == len(documents):
            return documents
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{len(done)} of {len(documents)} snapshots extracted by every type "
                f"(expected {expected}) after {timeout:.0f}s"
            )
        time.sleep(0.5)


def _recorded_usage(documents: list[dict[str, Any]]) -> dict[str, int]:
    """The usage our stages recorded on the snapshots (a cross-check of the server's count)."""
    total: Counter[str] = Counter()
    for doc in documents:
        for slot in (doc.get("extractions") or {}).values():
            for name, value in (slot.get("usage") or {}).items():
                if isinstance(value, int):
                    total[name] += value
    return dict(total)


def run(context: BenchContext) -> SuiteResult:
    counter = load_token_counter()
    turns = conversation_turns()
    raw: dict[str, Any] = {
        "turns": turns,
        "sessions": len(SESSIONS),
        "window": WINDOW,
        "types": list(TYPES),
        "tokenizer": counter.name,
        "baseline": run_baseline(counter),
    }
    figures = []
    base = raw["baseline"]
    name = "per-message (mem0 kind), same run"
    # The counts do not depend on the broker (the full profile shows both alike): the quick
    # profile runs our pipeline on the first broker only.
    brokers = context.brokers[:1] if context.quick else context.brokers
    raw["brokers_run"] = list(brokers)
    for kind in brokers:
        ours = run_ours(context, kind, counter)
        raw[kind] = ours
        figures += [
            Figure(
                "LLM cost: calls",
                kind,
                "calls/100 turns",
                ours["calls_per_100_turns"],
                base["calls_per_100_turns"],
                name,
                Aim("<=", 0.2),
            ),
            Figure(
                "LLM cost: tokens",
                kind,
                "tokens/100 turns",
                ours["tokens_per_100_turns"],
                base["tokens_per_100_turns"],
                name,
                Aim("<=", 0.33),
                "prompt + completion, Qwen2.5 tokenizer"
                if counter.name.startswith("Qwen")
                else "prompt + completion, approximate count",
            ),
        ]
    return SuiteResult(figures, raw)


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["llm_cost", *sys.argv[1:]]))
