"""Session snapshots, and what each memory type's extraction decided about one.

A snapshot is a bounded, contiguous run of a session's turns promoted together. Its id derives
from the turns it holds (see `snapshot_id`), never from its position in the session.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from events.base import Event, Identifier, UtcDatetime
from events.memories import LLMUsage, MemoryDecision, MemoryType, upcast_decisions
from events.turns import Role

PromotionReason = Literal["count", "tokens", "topic_shift", "idle", "flush"]
"""`count`: the window is full (`max_messages` turns, or the next turn would cross the snapshot
byte budget); `tokens`: the next turn would cross the window's token budget (`max_tokens`, an
estimate: `handlers.snapshot_size`); `topic_shift`: the next turn's embedding is far from the
window's (`handlers.topic_shift`); `idle`: the session went quiet; `flush`: the application
ended the session."""

_SNAPSHOT_NAMESPACE = uuid.UUID("6f1c8a52-3f7e-4d8b-9a43-0c2d6f1e9b10")


def snapshot_id(user_id: str, session_id: str, turn_ids: Sequence[str]) -> str:
    """The id of the snapshot of `turn_ids` (in order) of a session.

    It depends only on the inputs: a replayed or duplicated promotion of the same turns has the
    same id, and two different runs of turns never share one, even when the log is lost and a
    session id is reused (turn ids are unique), which a position such as the snapshot's `seq`
    cannot promise.
    """
    if not turn_ids:
        raise ValueError("a snapshot holds at least one turn")
    digest = hashlib.sha256("\n".join(turn_ids).encode()).hexdigest()
    return str(uuid.uuid5(_SNAPSHOT_NAMESPACE, f"{user_id}|{session_id}|{digest}"))


class SnapshotTurn(BaseModel):
    """A turn as carried inside a snapshot (the fields extraction needs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn_id: str
    role: Role
    name: str | None = None
    tool_name: str | None = None
    content: str
    occurred_at: UtcDatetime


class SnapshotPromoted(Event):
    """A session's unrecorded turns were promoted as one snapshot (`event_id` == snapshot id).

    `occurred_at` is the event time of the input that promoted it (the turn that filled the
    window, the flush, or the idle command). `seq` numbers the session's snapshots within one
    lifetime of the log: a display order, never an identity.
    """

    event_type: Literal["SnapshotPromoted"] = "SnapshotPromoted"
    schema_version: Literal[1] = 1

    user_id: Identifier
    session_id: Identifier
    agent_id: Identifier | None = None
    seq: int = Field(ge=0)
    reason: PromotionReason
    turns: tuple[SnapshotTurn, ...] = Field(min_length=1)

    @property
    def key(self) -> str:
        """Snapshots are keyed by user scope, so one user's snapshots stay ordered."""
        return self.user_id

    @property
    def turn_ids(self) -> tuple[str, ...]:
        return tuple(turn.turn_id for turn in self.turns)


class SnapshotExtracted(Event):
    """One memory type's extraction of a snapshot, with every decision it made, in one record.

    The record is the unit of atomicity: its decisions (each a whole memory event with its own
    id) are applied together or not at all, and the first record for a snapshot and type wins
    over any later one (a re-extraction after a crash). `failure` says why there are none when
    the LLM's output stayed invalid. Travels on the memories topic, keyed by user.
    """

    event_type: Literal["SnapshotExtracted"] = "SnapshotExtracted"
    schema_version: Literal[2] = 2

    snapshot_id: str = Field(min_length=1, max_length=200)
    user_id: Identifier
    session_id: Identifier
    agent_id: Identifier | None = None
    memory_type: MemoryType
    decisions: tuple[MemoryDecision, ...] = ()
    attempts: int = Field(ge=0)
    failure: str | None = Field(default=None, max_length=4_000)
    usage: LLMUsage = LLMUsage()
    """The LLM calls and tokens of the extraction and of its reconciliation."""
    redrive_id: str | None = Field(default=None, min_length=1, max_length=200)
    """Set when this extraction answers an operator's redrive of a dead-lettered snapshot: it
    may then replace a failed result (docs/architecture.md, "Dead letters")."""

    @model_validator(mode="before")
    @classmethod
    def _current_decisions(cls, stored: Any) -> Any:
        return upcast_decisions(stored)

    @model_validator(mode="after")
    def _decisions_belong_to_this_extraction(self) -> SnapshotExtracted:
        for index, decision in enumerate(self.decisions):
            if decision.user_id != self.user_id:
                raise ValueError(f"decisions[{index}] is about user {decision.user_id!r}")
            if decision.memory_type != self.memory_type:
                raise ValueError(f"decisions[{index}] is a {decision.memory_type} memory")
        return self

    @property
    def key(self) -> str:
        return self.user_id

    @property
    def memory_ids(self) -> tuple[str, ...]:
        """The memories this extraction added, updated or reinforced, in decision order."""
        return tuple(dict.fromkeys(decision.memory_id for decision in self.decisions))
