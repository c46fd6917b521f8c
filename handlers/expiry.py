"""Expiry: when a memory version expires, and the command that forgets it then.

Pure functions (docs/architecture.md, "Expiry"). A version's `expires_at` is decided once, by
the memory type's stage when it writes the decision, and recorded in the event: the time the
application asked for (a direct save's `expires_at`) or, failing that, the decision's event time
plus the type's retention. A replay reads the recorded time back and never re-decides it.

The stage's timer only *notices* that a current version is due by the wall clock; what happens
goes through the log as a `MemoryExpired` command, stamped with the version's `expires_at` and
identified by the memory and that time, so every worker that notices it writes the same command
and a replay sees the same one. The stage acts on it when it reads it back, if that version is
still the current one (`handlers.forgetting.memories_to_forget`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from events.forgetting import MemoryExpired
from events.memories import MemoryAdded, MemoryEvent, MemoryType, MemoryUpdated, derived_id
from handlers.known_memory import KnownMemoryFacts


def with_expiry(
    decisions: Sequence[MemoryEvent],
    *,
    retention: timedelta | None,
    requested: datetime | None = None,
) -> list[MemoryEvent]:
    """`decisions` with the expiry of each new version set: `requested` when the application
    gave one, else the decision's time plus `retention`, else none. A reinforcement keeps the
    expiry of the version it reinforces."""
    stamped: list[MemoryEvent] = []
    for decision in decisions:
        if isinstance(decision, MemoryAdded | MemoryUpdated):
            expires_at = requested or (
                decision.occurred_at + retention if retention is not None else None
            )
            decision = decision.model_copy(update={"expires_at": expires_at})
        stamped.append(decision)
    return stamped


def due_expiries(
    known: Iterable[KnownMemoryFacts], memory_type: MemoryType, now: datetime
) -> list[MemoryExpired]:
    """The expiry commands for the known memories whose current version is due at `now`."""
    return [
        expiry_command(memory, memory_type)
        for memory in known
        if memory.expires_at is not None and memory.user_id and memory.expires_at <= now
    ]


def expiry_command(memory: KnownMemoryFacts, memory_type: MemoryType) -> MemoryExpired:
    """The command that forgets `memory` at its current version's expiry."""
    if memory.expires_at is None or not memory.user_id:
        raise ValueError(f"memory {memory.memory_id} has no expiry or no user")
    return MemoryExpired(
        event_id=derived_id("expired", memory.memory_id, memory.expires_at.isoformat()),
        occurred_at=memory.expires_at,
        user_id=memory.user_id,
        memory_id=memory.memory_id,
        memory_type=memory_type,
        expires_at=memory.expires_at,
    )
