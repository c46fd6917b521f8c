"""Session snapshots: a bounded, contiguous run of a session's turns promoted together."""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from events.base import Event, Identifier, UtcDatetime
from events.turns import Role

PromotionReason = Literal["count", "idle", "flush"]

_SNAPSHOT_NAMESPACE = uuid.UUID("6f1c8a52-3f7e-4d8b-9a43-0c2d6f1e9b10")


def snapshot_id(user_id: str, session_id: str, seq: int) -> str:
    """The deterministic id of a session's `seq`-th snapshot: replays produce the same id."""
    return str(uuid.uuid5(_SNAPSHOT_NAMESPACE, f"{user_id}|{session_id}|{seq}"))


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
    """A session's unrecorded turns were promoted as one snapshot (`event_id` == snapshot id)."""

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


class SnapshotExtracted(Event):
    """One memory type's extraction of a snapshot finished (with memories, none, or a failure).

    Travels on the memories topic after the memory events it produced, keyed by user, so the read
    model can tell which snapshots are still waiting for which extractor.
    """

    event_type: Literal["SnapshotExtracted"] = "SnapshotExtracted"
    schema_version: Literal[1] = 1

    snapshot_id: str = Field(min_length=1, max_length=200)
    user_id: Identifier
    session_id: Identifier
    memory_type: Literal["semantic", "episodic", "procedural", "taxonomic"]
    memory_ids: tuple[str, ...] = ()
    attempts: int = Field(ge=0)
    failure: str | None = Field(default=None, max_length=4_000)

    @property
    def key(self) -> str:
        return self.user_id
