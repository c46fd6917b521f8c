"""Event factories for tests: sensible defaults, any field overridable by keyword.

`turn()` is a user turn of session s1 of user u1 at `CLOCK`; `turn(role="assistant",
name="John")` another named human; `snapshot(turns=[turn(), {"role": "assistant"}])` a
snapshot of those turns (dicts are `turn()` overrides) with its deterministic id.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from events.consolidations import MemoryConsolidationRequested
from events.dead_letters import DeadLetterRedriven, InputDeadLettered
from events.forgetting import MemoryForgotten, SessionForgotten, UserForgotten
from events.memories import (
    Evidence,
    LLMUsage,
    MemoryAdded,
    MemoryContent,
    MemoryReinforced,
    MemoryUpdated,
    Provenance,
    derived_id,
)
from events.rollbacks import MemoryRollbackRequested
from events.saves import MemorySaveRequested
from events.snapshots import SnapshotExtracted, SnapshotPromoted, SnapshotTurn, snapshot_id
from events.turns import Principal, SessionFlushRequested, SessionIdled, TurnRecorded

CLOCK = datetime(2026, 1, 31, 12, 0, 0, tzinfo=UTC)
"""A fixed, timezone-aware 'now' for deterministic tests."""

USER_ID = "u1"
SESSION_ID = "s1"

_ids = itertools.count(1)


def next_id(prefix: str = "evt") -> str:
    """A fresh, process-unique event id (`evt-1`, `evt-2`, ...)."""
    return f"{prefix}-{next(_ids)}"


def at(seconds: float) -> datetime:
    """`CLOCK` plus `seconds`."""
    return CLOCK + timedelta(seconds=seconds)


def turn(**overrides: Any) -> TurnRecorded:
    """A `TurnRecorded` (user turn, u1/s1, at CLOCK) with `overrides` applied."""
    fields: dict[str, Any] = {
        "event_id": next_id("turn"),
        "occurred_at": CLOCK,
        "recorded_at": CLOCK,
        "user_id": USER_ID,
        "session_id": SESSION_ID,
        "role": "user",
        "content": "I work at Stripe.",
    }
    fields.update(overrides)
    return TurnRecorded(**fields)


def snapshot_turn(source: TurnRecorded | None = None, **overrides: Any) -> SnapshotTurn:
    """A `SnapshotTurn` copied from `source` (default: a fresh `turn()`), then `overrides`."""
    source = source or turn()
    fields: dict[str, Any] = {
        "turn_id": source.event_id,
        "role": source.role,
        "name": source.name,
        "tool_name": source.tool_name,
        "content": source.content,
        "occurred_at": source.occurred_at,
    }
    fields.update(overrides)
    return SnapshotTurn(**fields)


def snapshot(
    turns: Iterable[TurnRecorded | SnapshotTurn | dict[str, Any]] | None = None,
    **overrides: Any,
) -> SnapshotPromoted:
    """A `SnapshotPromoted` of `turns` (TurnRecorded, SnapshotTurn or turn() overrides as dicts).

    Its `event_id` is the deterministic `snapshot_id(user_id, session_id, turn ids)` unless
    overridden.
    """
    items = list(turns) if turns is not None else [turn()]
    converted = []
    for item in items:
        if isinstance(item, SnapshotTurn):
            converted.append(item)
        elif isinstance(item, TurnRecorded):
            converted.append(snapshot_turn(item))
        else:
            converted.append(snapshot_turn(turn(**item)))
    fields: dict[str, Any] = {
        "occurred_at": CLOCK,
        "user_id": USER_ID,
        "session_id": SESSION_ID,
        "seq": 0,
        "reason": "count",
        "turns": tuple(converted),
    }
    fields.update(overrides)
    fields.setdefault(
        "event_id",
        snapshot_id(fields["user_id"], fields["session_id"], [t.turn_id for t in fields["turns"]]),
    )
    return SnapshotPromoted(**fields)


def flush(**overrides: Any) -> SessionFlushRequested:
    """A `SessionFlushRequested` for u1/s1 at CLOCK."""
    fields: dict[str, Any] = {
        "event_id": next_id("flush"),
        "occurred_at": CLOCK,
        "user_id": USER_ID,
        "session_id": SESSION_ID,
    }
    fields.update(overrides)
    return SessionFlushRequested(**fields)


def idle(window_seq: int = 0, **overrides: Any) -> SessionIdled:
    """A `SessionIdled` command for window `window_seq` of u1/s1 at CLOCK."""
    fields: dict[str, Any] = {
        "event_id": next_id("idle"),
        "occurred_at": CLOCK,
        "user_id": USER_ID,
        "session_id": SESSION_ID,
        "window_seq": window_seq,
    }
    fields.update(overrides)
    return SessionIdled(**fields)


def content(**overrides: Any) -> MemoryContent:
    """A `MemoryContent`: a fact about the current user."""
    fields: dict[str, Any] = {
        "subject": "the user",
        "owner": "user",
        "text": "The user works at Stripe.",
        "category": "work",
    }
    fields.update(overrides)
    return MemoryContent(**fields)


def term(name: str, *aliases: str, examples: Iterable[str] = ()) -> MemoryContent:
    """A taxonomic term's `MemoryContent`: `name`, a message broker, with its aliases and
    examples."""
    return content(
        subject=name,
        text=f"{name}: a message broker.",
        category="software",
        attributes={"term": name, "aliases": list(aliases), "examples": list(examples)},
    )


def evidence(**overrides: Any) -> Evidence:
    """Extraction evidence from snapshot 0 of u1/s1."""
    fields: dict[str, Any] = {
        "source": "extraction",
        "snapshot_id": snapshot_id(USER_ID, SESSION_ID, ["turn-0"]),
        "session_id": SESSION_ID,
        "observed_at": CLOCK,
    }
    fields.update(overrides)
    return Evidence(**fields)


def provenance(**overrides: Any) -> Provenance:
    """Extracted by the semantic prompt with a scripted model and 2-dimension embeddings."""
    fields: dict[str, Any] = {
        "prompt_version": "semantic-3",
        "llm_model": "scripted-llm",
        "embedding_model": "scripted-embedding",
        "embedding_dimensions": 2,
    }
    fields.update(overrides)
    return Provenance(**fields)


def memory_added(**overrides: Any) -> MemoryAdded:
    """A semantic `MemoryAdded` (version 1) for u1."""
    memory_id = overrides.pop("memory_id", derived_id("memory", "test", next(_ids)))
    fields: dict[str, Any] = {
        "event_id": derived_id("added", memory_id),
        "occurred_at": CLOCK,
        "memory_id": memory_id,
        "memory_type": "semantic",
        "user_id": USER_ID,
        "content": content(),
        "embedding": (0.6, 0.8),
        "evidence": evidence(),
        "provenance": provenance(),
    }
    fields.update(overrides)
    return MemoryAdded(**fields)


def memory_updated(**overrides: Any) -> MemoryUpdated:
    """A semantic `MemoryUpdated` to version 2 for u1."""
    memory_id = overrides.pop("memory_id", derived_id("memory", "test", next(_ids)))
    fields: dict[str, Any] = {
        "event_id": derived_id("updated", memory_id, 2),
        "occurred_at": CLOCK,
        "memory_id": memory_id,
        "memory_type": "semantic",
        "user_id": USER_ID,
        "version": 2,
        "supersedes_version": 1,
        "content": content(text="The user works at Google."),
        "embedding": (0.8, 0.6),
        "evidence": evidence(),
        "reason": "the user changed jobs",
        "provenance": provenance(reconciled_by="llm"),
    }
    fields.update(overrides)
    return MemoryUpdated(**fields)


def memory_reinforced(**overrides: Any) -> MemoryReinforced:
    """A semantic `MemoryReinforced` of version 1 for u1."""
    memory_id = overrides.pop("memory_id", derived_id("memory", "test", next(_ids)))
    fields: dict[str, Any] = {
        "event_id": derived_id("reinforced", memory_id, 1),
        "occurred_at": CLOCK,
        "memory_id": memory_id,
        "memory_type": "semantic",
        "user_id": USER_ID,
        "version": 1,
        "evidence": evidence(),
        "provenance": provenance(),
    }
    fields.update(overrides)
    return MemoryReinforced(**fields)


def dead_letter(**overrides: Any) -> InputDeadLettered:
    """An `InputDeadLettered` from the turns topic."""
    fields: dict[str, Any] = {
        "event_id": next_id("dead"),
        "occurred_at": CLOCK,
        "stage": "decode",
        "reason": "not JSON",
        "source_topic": "memstream.turns",
        "source_partition": 0,
        "source_offset": 7,
        "record_key": "u1|s1",
        "payload": "{oops",
        "dead_lettered_at": CLOCK,
    }
    fields.update(overrides)
    return InputDeadLettered(**fields)


def redrive(**overrides: Any) -> DeadLetterRedriven:
    """An operator's redrive of a turns-topic dead letter."""
    fields: dict[str, Any] = {
        "event_id": next_id("redrive"),
        "occurred_at": CLOCK,
        "dead_letter_id": "dead-0001",
        "stage": "window",
        "target_topic": "memstream.turns",
        "target_partition": 0,
        "target_offset": 12,
    }
    fields.update(overrides)
    return DeadLetterRedriven(**fields)


def principal(kind: str = "end_user", principal_id: str = USER_ID) -> Principal:
    """A `Principal` (end user u1 by default)."""
    return Principal(kind=kind, id=principal_id)  # type: ignore[arg-type]


def extracted(
    snap: SnapshotPromoted | None = None,
    *contents: MemoryContent,
    memory_type: str = "semantic",
    failure: str | None = None,
    attempts: int = 1,
    redrive_id: str | None = None,
) -> SnapshotExtracted:
    """The extraction record of `snap` that ADDs `contents` (vectors `(1.0, 0.0)`)."""
    from handlers.extraction.base import ExtractionOutcome
    from handlers.extraction.results import extraction_record, snapshot_source
    from handlers.reconcile import new_memory_id

    snap = snap or snapshot()
    source = snapshot_source(snap)
    decisions = [
        MemoryAdded(
            event_id=derived_id("added", memory_id),
            occurred_at=snap.occurred_at,
            memory_id=memory_id,
            memory_type=memory_type,
            user_id=snap.user_id,
            agent_id=snap.agent_id,
            content=item,
            embedding=(1.0, 0.0),
            evidence=source.evidence,
            provenance=provenance(),
        )
        for item in contents
        for memory_id in [new_memory_id(memory_type, snap.event_id, item)]
    ]
    outcome = ExtractionOutcome(tuple(contents), attempts, failure=failure)
    usage = LLMUsage(calls=attempts, prompt_tokens=100 * attempts, completion_tokens=20 * attempts)
    return extraction_record(
        snap,
        memory_type,
        outcome,
        decisions,
        usage,
        redrive_id=redrive_id,
    )


def save_request(**overrides: Any) -> MemorySaveRequested:
    """A direct save of a semantic fact about u1."""
    fields: dict[str, Any] = {
        "event_id": next_id("save"),
        "occurred_at": CLOCK,
        "user_id": USER_ID,
        "memory_type": "semantic",
        "content": content(),
    }
    fields.update(overrides)
    return MemorySaveRequested(**fields)


def rollback_request(**overrides: Any) -> MemoryRollbackRequested:
    """A request to restore version 1 of a semantic memory of u1, by an operator."""
    fields: dict[str, Any] = {
        "event_id": next_id("rollback"),
        "occurred_at": CLOCK,
        "user_id": USER_ID,
        "memory_type": "semantic",
        "memory_id": "m-1",
        "to_version": 1,
        "requested_by": "cli:alice",
        "reason": "the update was wrong",
    }
    fields.update(overrides)
    return MemoryRollbackRequested(**fields)


def consolidation_request(**overrides: Any) -> MemoryConsolidationRequested:
    """A request to consolidate u1's semantic memories, by an operator."""
    fields: dict[str, Any] = {
        "event_id": next_id("consolidation"),
        "occurred_at": CLOCK,
        "user_id": USER_ID,
        "memory_types": ("semantic",),
        "requested_by": "cli:alice",
        "reason": "weekly tidy-up",
        "max_calls": 5,
    }
    fields.update(overrides)
    return MemoryConsolidationRequested(**fields)


STRIPE_FACTS = {
    "facts": [
        {
            "subject": "the user",
            "statement": "The user works at Stripe.",
            "owner": "user",
            "category": "work",
            "profile_field": "employer",
        },
    ]
}
"""A scripted semantic answer: the user works at Stripe (their profile's employer)."""


def memory_forgotten(**overrides: Any) -> MemoryForgotten:
    """A `MemoryForgotten` request for a semantic memory of u1 at CLOCK."""
    fields: dict[str, Any] = {
        "event_id": next_id("forget-memory"),
        "occurred_at": CLOCK,
        "user_id": USER_ID,
        "memory_id": "m-1",
        "memory_type": "semantic",
        "requested_by": "sdk",
        "reason": "the user asked",
    }
    fields.update(overrides)
    return MemoryForgotten(**fields)


def session_forgotten(**overrides: Any) -> SessionForgotten:
    """A `SessionForgotten` request for u1/s1 at CLOCK."""
    fields: dict[str, Any] = {
        "event_id": next_id("forget-session"),
        "occurred_at": CLOCK,
        "user_id": USER_ID,
        "session_id": SESSION_ID,
        "requested_by": "sdk",
    }
    fields.update(overrides)
    return SessionForgotten(**fields)


def user_forgotten(turns_partition: int | None = None, **overrides: Any) -> UserForgotten:
    """A `UserForgotten` request for u1 at CLOCK (the snapshots-topic copy by default)."""
    fields: dict[str, Any] = {
        "event_id": next_id("forget-user"),
        "occurred_at": CLOCK,
        "user_id": USER_ID,
        "requested_by": "sdk",
        "turns_partition": turns_partition,
    }
    fields.update(overrides)
    return UserForgotten(**fields)
