"""A realistic log for the projection benchmark, built with the real event models and handlers.

Users hold sessions; each session's turns are promoted in snapshots (ids by
`events.snapshots.snapshot_id`), and every snapshot gets one `SnapshotExtracted` per memory
type, as the four extraction stages write them. The decisions come from the real reconciler
(`handlers.reconcile.reconcile`, default thresholds, a scripted LLM port) over 384-dimension
vectors (the local embedder's size), so the log carries ADDs, REINFORCEs of restated facts and
UPDATEs of changed ones, profile facts, named user turns, and results without decisions (a type
with nothing to extract). Deterministic: the same seed gives the same events.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from events.codec import AnyEvent
from events.memories import (
    MEMORY_TYPES,
    LLMUsage,
    MemoryContent,
    MemoryType,
    Provenance,
)
from events.snapshots import SnapshotExtracted, SnapshotPromoted, SnapshotTurn, snapshot_id
from events.turns import TurnRecorded
from handlers.extraction.base import ExtractionOutcome
from handlers.extraction.results import extraction_record, snapshot_source
from handlers.known_memory import KnownMemory, evolve
from handlers.reconcile import Answer, NewMemory, Question, Thresholds, reconcile

DIMENSIONS = 384
EMBEDDING_MODEL = "bench-embedding"
THRESHOLDS = Thresholds(reinforce=0.995, ask=0.89)
START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)

_SAID = (
    "I moved to Lisbon last spring and I still walk to the office along the river every day.",
    "Can you remind me which train goes to Porto in the morning? I always forget the times.",
    "My sister Ana is visiting next week, she is a nurse and loves seafood restaurants.",
    "I prefer answers in short bullet points, and please always include the sources.",
    "We adopted a cat called Miso; she is three years old and hates the vacuum cleaner.",
    "At work I'm migrating our billing service from Python 3.9 to 3.11 this quarter.",
)
_ANSWERED = (
    "Sure. The first direct train leaves Santa Apolónia at 06:09 and takes about three hours.",
    "Noted. Here are three seafood places near the river, all open on weekday evenings.",
    "Understood: short bullet points with sources from now on. Anything else to adjust?",
    "Migrating to 3.11 is mostly smooth; check C extensions and the removed asyncio APIs first.",
)
_FACTS: dict[MemoryType, tuple[str, ...]] = {
    "semantic": (
        "The user lives in Lisbon.",
        "The user works on a billing service.",
        "The user's sister Ana is a nurse.",
        "The user has a cat called Miso.",
        "The user prefers short bullet-point answers.",
        "The user likes seafood.",
    ),
    "episodic": (
        "The user planned a trip to Porto by train.",
        "The user's sister announced a visit for next week.",
        "The user started the Python 3.11 migration.",
    ),
    "procedural": ("Answer the user in short bullet points with sources.",),
    "taxonomic": ("Miso: the user's cat.",),
}
_PROFILE_FIELDS = {0: "location", 1: "occupation"}


@dataclass
class Workload:
    """The log, topic by topic, in the order each topic's producer wrote it."""

    turns: list[TurnRecorded] = field(default_factory=list)
    snapshots: list[SnapshotPromoted] = field(default_factory=list)
    results: list[SnapshotExtracted] = field(default_factory=list)

    @property
    def events(self) -> list[AnyEvent]:
        """Every record, in replay order (turns, snapshots, results)."""
        return [*self.turns, *self.snapshots, *self.results]

    @property
    def decisions(self) -> int:
        return sum(len(result.decisions) for result in self.results)

    def actions(self) -> dict[str, int]:
        """How many decisions of each kind the results carry."""
        counts: dict[str, int] = {}
        for result in self.results:
            for decision in result.decisions:
                counts[decision.event_type] = counts.get(decision.event_type, 0) + 1
        return counts


def unit_vector(rng: random.Random, dimensions: int = DIMENSIONS) -> tuple[float, ...]:
    values = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = math.sqrt(sum(v * v for v in values))
    return tuple(v / norm for v in values)


def nudged(vector: Sequence[float], rng: random.Random, amount: float) -> tuple[float, ...]:
    """`vector` moved by `amount` of a random direction and renormalised (cosine to the original
    about 1 / sqrt(1 + amount²): 0.35 lands in the ask-the-LLM band, 0.05 above REINFORCE)."""
    noise = unit_vector(rng, len(vector))
    moved = [a + amount * b for a, b in zip(vector, noise, strict=True)]
    norm = math.sqrt(sum(v * v for v in moved))
    return tuple(v / norm for v in moved)


async def _update_first(questions: Sequence[Question]) -> list[Answer | None]:
    """The scripted LLM: a fact in the ambiguous band replaces the most similar candidate."""
    return [
        Answer("UPDATE", question.options[0].memory.memory_id, "the user said it changed")
        for question in questions
    ]


def _turns(
    rng: random.Random, user: str, session: str, named: bool, start: datetime, count: int
) -> list[TurnRecorded]:
    turns = []
    for index in range(count):
        at = start + timedelta(seconds=30 * index)
        user_turn = index % 2 == 0
        turns.append(
            TurnRecorded(
                event_id=f"{user}-{session}-t{index}-{rng.getrandbits(32):08x}",
                occurred_at=at,
                recorded_at=at,
                user_id=user,
                session_id=session,
                role="user" if user_turn else "assistant",
                name=f"Name{user}" if user_turn and named else None,
                content=rng.choice(_SAID if user_turn else _ANSWERED),
            )
        )
    return turns


def _snapshot(turns: list[TurnRecorded], seq: int, reason: str) -> SnapshotPromoted:
    first = turns[0]
    return SnapshotPromoted(
        event_id=snapshot_id(first.user_id, first.session_id, [t.event_id for t in turns]),
        occurred_at=turns[-1].recorded_at,
        user_id=first.user_id,
        session_id=first.session_id,
        seq=seq,
        reason=reason,  # type: ignore[arg-type]
        turns=tuple(
            SnapshotTurn(
                turn_id=t.event_id,
                role=t.role,
                name=t.name,
                content=t.content,
                occurred_at=t.occurred_at,
            )
            for t in turns
        ),
    )


def _found(
    rng: random.Random,
    memory_type: MemoryType,
    ordinal: int,
    known: dict[str, KnownMemory],
) -> list[NewMemory]:
    """What this type's extractor finds in the user's `ordinal`-th snapshot: new facts, a fact
    restated (same vector: REINFORCE) or changed (a nudged vector: the LLM says UPDATE)."""
    wanted = {
        "semantic": 2,
        "episodic": 1,
        "procedural": ordinal % 3 == 0,
        "taxonomic": ordinal % 4 == 1,
    }
    found: list[NewMemory] = []
    for slot in range(int(wanted[memory_type])):
        previous = sorted(known.values(), key=lambda k: k.memory_id)
        if memory_type == "semantic" and slot == 1 and previous and rng.random() < 0.6:
            target = rng.choice(previous)
            if rng.random() < 0.5:  # restated
                found.append(NewMemory(target.content, target.embedding))
            else:  # changed
                text = f"{target.content.text.rstrip('.')} (since snapshot {ordinal})."
                content = target.content.model_copy(update={"text": text})
                found.append(NewMemory(content, nudged(target.embedding, rng, 0.35)))
            continue
        facts = _FACTS[memory_type]
        text = f"{facts[(ordinal + slot) % len(facts)].rstrip('.')} (snapshot {ordinal}, {slot})."
        attributes = {}
        if memory_type == "semantic" and ordinal in _PROFILE_FIELDS and slot == 0:
            attributes["profile_field"] = _PROFILE_FIELDS[ordinal]
        content = MemoryContent(
            subject="the user",
            owner="agent" if memory_type == "procedural" else "user",
            text=text,
            category="basic_info" if memory_type == "semantic" else None,
            attributes=attributes,
        )
        found.append(NewMemory(content, unit_vector(rng)))
    return found


async def _generate(
    seed: int, users: int, sessions: int, snapshots: int, turns_per_snapshot: tuple[int, int]
) -> Workload:
    rng = random.Random(seed)
    workload = Workload()
    for u in range(users):
        user = f"user{u:04d}"
        named = u % 2 == 0
        known: dict[MemoryType, dict[str, KnownMemory]] = {t: {} for t in MEMORY_TYPES}
        ordinal = 0
        for s in range(sessions):
            session = f"s{s}"
            start = START + timedelta(hours=u % 24, days=s)
            for seq in range(snapshots):
                count = rng.randint(*turns_per_snapshot)
                turns = _turns(rng, user, session, named, start, count)
                start = turns[-1].recorded_at + timedelta(minutes=1)
                reason = "flush" if seq == snapshots - 1 else "count"
                snap = _snapshot(turns, seq, reason)
                workload.turns.extend(turns)
                workload.snapshots.append(snap)
                for memory_type in MEMORY_TYPES:
                    news = _found(rng, memory_type, ordinal, known[memory_type])
                    result = await _extracted(snap, memory_type, news, known[memory_type])
                    known[memory_type] = evolve(known[memory_type], result.decisions)
                    workload.results.append(result)
                ordinal += 1
    return workload


async def _extracted(
    snap: SnapshotPromoted,
    memory_type: MemoryType,
    news: list[NewMemory],
    known: dict[str, KnownMemory],
) -> SnapshotExtracted:
    provenance = Provenance(
        prompt_version=f"{memory_type}-3",
        llm_model="bench-llm",
        embedding_model=EMBEDDING_MODEL,
        embedding_dimensions=DIMENSIONS,
    )
    decided = await reconcile(
        memory_type,
        news,
        known.values(),
        source=snapshot_source(snap),
        provenance=provenance,
        thresholds=THRESHOLDS,
        ask=_update_first,
    )
    calls = (1 if news else 0) + (1 if decided.asked else 0)
    usage = LLMUsage(calls=calls, prompt_tokens=900 * calls, completion_tokens=60 * calls)
    outcome = ExtractionOutcome(tuple(n.content for n in news), attempts=1 if news else 0)
    return extraction_record(snap, memory_type, outcome, decided.events, usage)


def generate(
    seed: int,
    *,
    users: int,
    sessions: int = 1,
    snapshots: int = 2,
    turns_per_snapshot: tuple[int, int] = (4, 12),
) -> Workload:
    """`users` x `sessions` x `snapshots` snapshots of 4 to 12 turns, and their results."""
    return asyncio.run(_generate(seed, users, sessions, snapshots, turns_per_snapshot))
