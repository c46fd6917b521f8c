"""Extraction time on the packaged local model: seconds per snapshot per memory type, the share
llama.cpp spent evaluating the prompt vs generating, and the extraction step's overhead over a
bare request with the same prompt.

    python -m bench extraction_time [--quick] [--local-model small|large|none]

Holds ``/tmp/memstream-llama.lock`` while its model server runs. Snapshots are windows of 20 turns
of the LLM-cost conversation (`bench.cost_conversation`): the size the default window promotes.
For each snapshot and type the extraction runs as a stage runs it (`handlers.extraction.base.
extract` through `memstream.providers.clients.OpenAIChatModel`: request, validation, parsing,
attribution, retries); the identical request (same messages and parameters) is sent bare with
httpx, and once more with ``max_tokens=1``. The order of the three rotates from snapshot to
snapshot, and no two consecutive requests share a system prompt, so llama.cpp's reuse of the
previous prompt's prefix helps none of them; the server runs without the prompt cache
`memstream up` enables (every request evaluates its whole prompt; the cache's effect is
measured in bench/types_cost-1.5b-cache.json).

The prompt's time is the ``max_tokens=1`` request's (prompt evaluation and one token),
generation's the bare request's minus that: llama-cpp-python's server does not return
llama.cpp's ``timings``, and the counters it logs are not trustworthy (0.07 ms of prompt
evaluation for a 39-token prompt whose request took 50 s; they are kept in the raw rows,
`bench.llama_timings`, but not used). Not included: Kafka, embedding and reconciliation (their
LLM calls are counted by the llm_cost suite; end to end is the freshness suite's).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from bench.core import BenchContext, Figure, SuiteResult
from bench.cost_conversation import SESSIONS, Session
from bench.llama_timings import LogCursor, llama_lock, parse_timings
from events.memories import MEMORY_TYPES, MemoryType
from events.snapshots import SnapshotPromoted, SnapshotTurn, snapshot_id
from handlers.extraction.base import extract
from handlers.extraction.registry import extractor_for
from handlers.ports import ChatAnswer
from memstream.providers.clients import OpenAIChatModel

WINDOW = 20
CLOCK = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
MAX_TOKENS = 1024
"""`OpenAIChatModel`'s default, which the stages use."""


def window_snapshot(session: Session, turns: int = WINDOW) -> SnapshotPromoted:
    """The first `turns` turns of a session, as the window would promote them."""
    messages = session.messages()[:turns]
    snapshot_turns = tuple(
        SnapshotTurn(
            turn_id=f"{session.session_id}-{index}",
            role=message["role"],  # type: ignore[arg-type]
            content=message["content"],
            occurred_at=CLOCK + timedelta(seconds=index),
        )
        for index, message in enumerate(messages)
    )
    return SnapshotPromoted(
        event_id=snapshot_id("bench-user", session.session_id, [t.turn_id for t in snapshot_turns]),
        occurred_at=CLOCK + timedelta(seconds=len(messages)),
        user_id="bench-user",
        session_id=session.session_id,
        seq=0,
        reason="count",
        turns=snapshot_turns,
    )


def bare_body(model: str, messages: list[dict[str, str]]) -> dict[str, Any]:
    """The request `OpenAIChatModel.complete_json` sends, as a JSON body."""
    return {
        "model": model,
        "messages": messages,
        "response_format": {"type": "json_object"},
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
    }


class _Recording:
    """The stage's chat model, keeping the messages of every request."""

    def __init__(self, inner: OpenAIChatModel) -> None:
        self.inner = inner
        self.sent: list[list[dict[str, str]]] = []

    async def complete_json(self, messages: Any) -> ChatAnswer:
        self.sent.append([dict(m) for m in messages])
        return await self.inner.complete_json(messages)


async def _stage(
    base_url: str, model: str, snapshot: SnapshotPromoted, memory_type: MemoryType
) -> dict[str, Any]:
    # A client per event loop: each asyncio.run has its own, and an HTTP connection pool
    # cannot outlive the loop it was made in.
    llm = OpenAIChatModel(base_url=base_url, api_key="local", model=model, timeout=900)
    recording = _Recording(llm)
    try:
        started = time.perf_counter()
        outcome = await extract(extractor_for(memory_type), snapshot, recording, attempts=3)
        seconds = time.perf_counter() - started
    finally:
        await llm.aclose()
    expected = extractor_for(memory_type).prompt(snapshot)
    if recording.sent and recording.sent[0] != expected:
        raise AssertionError(f"{memory_type}: the stage sent another prompt than the bare request")
    return {
        "seconds": seconds,
        "calls": len(outcome.answers),
        "memories": len(outcome.memories),
        "failure": outcome.failure,
    }


def _bare(client: httpx.Client, base_url: str, body: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    response = client.post(f"{base_url}/chat/completions", json=body)
    seconds = time.perf_counter() - started
    response.raise_for_status()
    return {"seconds": seconds, "calls": 1}


SIDES = ("stage", "bare", "probe")


def sides_for(index: int) -> tuple[str, ...]:
    """The order of the three sides for the `index`-th snapshot: rotated, so none always runs
    first (or right after the warm-up)."""
    shift = index % len(SIDES)
    return SIDES[shift:] + SIDES[:shift]


def shares_system_prompt(last: list[dict[str, str]], messages: list[dict[str, str]]) -> bool:
    """Whether a request would start with the previous one's prompt, which the server reuses
    instead of evaluating it (one type asked of a snapshot, as in the quick profile, makes the
    three sides the same request)."""
    return bool(last) and bool(messages) and last[0] == messages[0]


def measure(
    base_url: str,
    model: str,
    snapshots: list[SnapshotPromoted],
    cursor: LogCursor,
    types: tuple[MemoryType, ...] = MEMORY_TYPES,
) -> list[dict[str, Any]]:
    """For each snapshot, each side in turn over every type worth asking: the stage's
    extraction, the bare request, and the bare request with ``max_tokens=1`` (the prompt's
    evaluation and one token). No two consecutive requests share a system prompt: where they
    would (one type asked), an untimed one-token request goes in between."""
    rows: list[dict[str, Any]] = []
    with httpx.Client(timeout=900) as client:
        warm_up = [{"role": "user", "content": 'Answer with the JSON object {"ok": true}.'}]
        client.post(f"{base_url}/chat/completions", json=bare_body(model, warm_up))
        cursor.read()  # untimed: the first request pays for loading the weights
        last: list[dict[str, str]] = warm_up
        for index, snapshot in enumerate(snapshots):
            asked = [t for t in types if extractor_for(t).worth_asking(snapshot)]
            order = sides_for(index)
            for side in order:
                for memory_type in asked:
                    body = bare_body(model, extractor_for(memory_type).prompt(snapshot))
                    if shares_system_prompt(last, body["messages"]):
                        # untimed: another prompt in between, so this one is evaluated whole
                        spacer = {**bare_body(model, warm_up), "max_tokens": 1}
                        client.post(f"{base_url}/chat/completions", json=spacer)
                        cursor.read()
                    last = body["messages"]
                    if side == "stage":
                        row = asyncio.run(_stage(base_url, model, snapshot, memory_type))
                    elif side == "bare":
                        row = _bare(client, base_url, body)
                    else:
                        row = _bare(client, base_url, {**body, "max_tokens": 1})
                    logged = parse_timings(cursor.read())
                    row.update(
                        side=side,
                        memory_type=memory_type,
                        snapshot=snapshot.session_id,
                        turns=len(snapshot.turns),
                        position=order.index(side),
                        logged=asdict(logged),
                    )
                    rows.append(row)
                    print(
                        f"   {snapshot.session_id} {memory_type:10} {side:5} "
                        f"{row['seconds']:7.1f}s",
                        file=sys.stderr,
                        flush=True,
                    )
    return rows


def summary(rows: list[dict[str, Any]], memory_type: str) -> dict[str, float]:
    """One type's medians over snapshots: the stage's and the bare request's seconds, the
    prompt's (the max_tokens=1 request) and generation's (bare minus prompt), and the shares
    of prompt and generation in the bare request."""

    def seconds(side: str) -> dict[str, float]:
        return {
            r["snapshot"]: r["seconds"]
            for r in rows
            if r["memory_type"] == memory_type and r["side"] == side
        }

    stage, bare, probe = seconds("stage"), seconds("bare"), seconds("probe")
    snapshots = sorted(stage)
    prompt = [probe[s] for s in snapshots]
    generation = [max(bare[s] - probe[s], 0.0) for s in snapshots]
    return {
        "snapshots": len(snapshots),
        "stage_seconds": statistics.median(stage.values()),
        "bare_seconds": statistics.median(bare.values()),
        "prompt_seconds": statistics.median(prompt),
        "generation_seconds": statistics.median(generation),
        "prompt_share": sum(prompt) / sum(bare[s] for s in snapshots),
        "generation_share": sum(generation) / sum(bare[s] for s in snapshots),
        "stage_overhead_seconds": statistics.median(stage[s] - bare[s] for s in snapshots),
        "stage_calls": sum(
            r["calls"] for r in rows if r["memory_type"] == memory_type and r["side"] == "stage"
        ),
    }


def run(context: BenchContext) -> SuiteResult:
    choice = context.options.get("local_model", "small" if context.quick else "large")
    if choice == "none":
        return SuiteResult([], {"skipped": "--local-model none"})
    from memstream.runtime.local.llm import start_local_llm
    from memstream.runtime.local.weights import MODELS

    spec = MODELS[choice]
    sessions = SESSIONS[:1] if context.quick else SESSIONS[:3]
    snapshots = [window_snapshot(s) for s in sessions]
    # The quick (CI) profile times the semantic type only: one snapshot, three requests.
    types: tuple[MemoryType, ...] = ("semantic",) if context.quick else MEMORY_TYPES
    log_path = context.workdir / "extraction_time" / "local-llm.log"
    with llama_lock(), start_local_llm(spec, log_path=log_path, startup_timeout=300) as server:
        rows = measure(server.base_url, server.model, snapshots, LogCursor(log_path), types)
    figures = []
    per_type = {}
    for memory_type in MEMORY_TYPES:
        if not any(r["memory_type"] == memory_type for r in rows):
            continue
        found = per_type[memory_type] = summary(rows, memory_type)
        figures.append(
            Figure(
                "extraction time",
                f"{memory_type}, {spec.alias.split('-instruct')[0]}",
                "s/snapshot",
                found["stage_seconds"],
                found["bare_seconds"],
                "bare request, same prompt",
                None,
                f"of a bare request: prompt {found['prompt_share']:.0%}, generation "
                f"{found['generation_share']:.0%}; {found['snapshots']} snapshot(s) of "
                f"≤{WINDOW} turns, no prompt cache",
            )
        )
    return SuiteResult(
        figures,
        {
            "model": spec.alias,
            "prompt_cache": False,
            "snapshots": [s.session_id for s in snapshots],
            "per_type": per_type,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["extraction_time", *sys.argv[1:]]))
