"""Feeding LoCoMo conversations through a running memstream pipeline and answering from it.

Each conversation is one memstream user (`user_id` = the run's prefix + the sample id), each
LoCoMo session one `session_id`. Speakers follow the multi-speaker rules (docs/architecture.md,
"Speakers"): `speaker_a` is the current user (`role=user` with their name), `speaker_b` another
human (`role=assistant` with their name). Every turn is recorded with the session's date and
time as its `occurred_at`, each a millisecond after the one before (`turn_time`: the same order
on every run), then the session is flushed by a client whose clock reads the session's date, so
the snapshot — and every memory extracted from it — carries the date the conversation took
place (a backfill, as the SDK allows; the turns' `recorded_at` stays the wall clock, so the
window's idle timer is not fooled). With a window larger than a session (the suite sets it),
each session is one snapshot promoted by that flush.

Then the runner waits, on the read model, until every recorded turn is in a snapshot, every
snapshot has a result for every enabled memory type, and every decision of those results is
projected — and answers each question from `MemoryClient.search` (memories with their dates)
or `MemoryClient.build_context`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pymongo import MongoClient
from pymongo.errors import OperationFailure

from bench.locomo.dataset import Sample, Session
from handlers.extraction.dates import english_day
from handlers.recall import PAST_MESSAGES
from memstream.config import Settings
from memstream.sdk.client import MemoryClient

ContextMode = Literal["search", "build_context", "memories_only", "past_only", "full"]
"""What the answerer is shown: memstream's search results, its `build_context` block,
`build_context`'s block without past messages (`memories_only`: the memories alone, to measure
what the past messages add), or without memories and with more past messages in the same
budget (`past_only`: the profile and up to `PAST_ONLY_MESSAGES` of the user's earlier messages,
to measure what the memories add), or the whole transcript (the full-context baseline, no
pipeline needed)."""
PAST_ONLY_MESSAGES = 20
"""How many past messages `past_only` offers (the budget decides how many are shown)."""


def session_messages(sample: Sample, session: Session) -> list[dict[str, str]]:
    """The session's turns as SDK messages: speaker A is the user, speaker B another human."""
    return [
        {
            "role": "user" if turn.speaker == sample.speaker_a else "assistant",
            "name": turn.speaker,
            "content": turn.content,
        }
        for turn in session.turns
        if turn.content.strip()
    ]


def session_id(sample: Sample, session: Session) -> str:
    return f"{sample.sample_id}-session-{session.number}"


class SessionClock:
    """A clock that reads the date of the session being flushed."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


TURN_SPACING = timedelta(milliseconds=1)
"""How far apart a session's turns are recorded: its date and time, then one turn after another."""


def turn_time(session: Session, index: int) -> datetime:
    """When the session's `index`-th turn is recorded as said. LoCoMo dates a session, not its
    turns; turns a millisecond apart keep the session's day and their order, so that turns of
    equal relevance are read in the same order on every run (`handlers.recall`: the later
    first), not by their random event ids."""
    return session.at + index * TURN_SPACING


async def feed(settings: Settings, sample: Sample, user_id: str) -> int:
    """Record every session of `sample` as turns and flush it; the number of turns recorded."""
    clock = SessionClock()
    recorded = 0
    async with MemoryClient(settings) as client, MemoryClient(settings, clock=clock) as flusher:
        for session in sample.sessions:
            messages = session_messages(sample, session)
            if not messages:
                continue
            sid = session_id(sample, session)
            for index, message in enumerate(messages):
                await client.record(user_id, sid, [message], occurred_at=turn_time(session, index))
            recorded += len(messages)
            clock.now = turn_time(session, len(messages))
            await flusher.flush(user_id, sid)
    return recorded


@dataclass(frozen=True)
class Progress:
    """How far the pipeline is with one user's turns."""

    turns_in_snapshots: int
    snapshots: int
    extracted: int
    """Snapshots with a result for every enabled memory type."""
    decisions: int
    decisions_projected: int
    failures: int
    """Results that gave up (their reason is in the snapshot document)."""

    def done(self, turns: int) -> bool:
        return (
            self.turns_in_snapshots >= turns
            and self.extracted == self.snapshots
            and self.decisions_projected >= self.decisions
        )


def progress(db: Any, user_id: str, types: Sequence[str]) -> Progress:
    snapshots = list(
        db["snapshots"].find(
            {"user_id": user_id, "turn_ids": {"$exists": True}},
            {"turn_count": 1, "extractions": 1},
        )
    )
    decision_ids: list[str] = []
    extracted = failures = 0
    for snapshot in snapshots:
        results = snapshot.get("extractions") or {}
        if all(t in results for t in types):
            extracted += 1
        for t in types:
            record = results.get(t) or {}
            decision_ids.extend(record.get("decision_ids") or [])
            failures += 1 if record.get("failure") else 0
    distinct = sorted(set(decision_ids))  # ids are the projector's: one document per id
    projected = db["memory_events"].count_documents({"_id": {"$in": distinct}}) if distinct else 0
    return Progress(
        turns_in_snapshots=sum(int(s.get("turn_count") or 0) for s in snapshots),
        snapshots=len(snapshots),
        extracted=extracted,
        decisions=len(distinct),
        decisions_projected=projected,
        failures=failures,
    )


def wait_caught_up(
    settings: Settings, user_id: str, turns: int, *, timeout: float, poll: float = 0.5
) -> tuple[Progress, float]:
    """Poll the read model until the user's turns are all extracted and projected; the last
    progress and the seconds waited. `TimeoutError` (with the progress) after `timeout`."""
    types = list(settings.memory.extraction.enabled)
    started = time.monotonic()
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongodb.uri, tz_aware=True)
    try:
        db = mongo[settings.mongodb.database]
        while True:
            try:
                seen = progress(db, user_id, types)
            except OperationFailure:  # SecantusDB (beta) answers "internal error" under load
                seen = None
            waited = time.monotonic() - started
            if seen is not None and seen.done(turns):
                return seen, waited
            if waited > timeout:
                raise TimeoutError(
                    f"extraction of {user_id} not caught up after {timeout:.0f}s: {seen}"
                )
            time.sleep(poll)
    finally:
        mongo.close()


def dated(memory: Mapping[str, Any]) -> str:
    """A memory as the answer LLM sees it: ``[8 May 2023] text`` (the date it was said)."""
    at = memory.get("created_at")
    if isinstance(at, datetime):
        return f"[{english_day(at.date())}] {memory['text']}"
    return str(memory["text"])


async def retrieve(
    client: MemoryClient,
    user_id: str,
    question: str,
    *,
    mode: ContextMode,
    top_k: int,
    max_chars: int,
) -> tuple[str, list[str]]:
    """The context for one question and the memories in it (texts, for the raw report)."""
    if mode == "search":
        found = await client.search(user_id, question, limit=top_k)
        lines = [dated(memory) for memory in found]
        return "\n".join(f"- {line}" for line in lines), lines
    block = await client.build_context(
        user_id,
        question,
        max_chars=max_chars,
        per_type=0 if mode == "past_only" else max(1, top_k // 4),
        past_messages={"memories_only": 0, "past_only": PAST_ONLY_MESSAGES}.get(
            mode, PAST_MESSAGES
        ),
    )
    return block, [line for line in block.splitlines() if line.strip()]


async def with_retries(call: Any, attempts: int = 5) -> Any:
    """Reads right after the projection may meet SecantusDB's transient "internal error"."""
    for attempt in range(attempts):
        try:
            return await call()
        except OperationFailure:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")
