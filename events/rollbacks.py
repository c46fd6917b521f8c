"""Rollbacks: restore a memory to one of its earlier versions, with who asked and why.

`MemoryRollbackRequested` travels on the snapshots topic keyed by user, like a direct save, so
it is ordered with the user's snapshots and saves and reaches the stage of its memory type. The
stage decides (`handlers.rollback`) and writes one `MemoryRolledBack` record on the memories
topic: its one decision is an ordinary `MemoryUpdated` whose content, vector and expiry are the
target version's, or none and a `refused` reason.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from events.base import Event, Identifier
from events.forgetting import MAX_REASON_CHARS
from events.memories import MemoryDecision, MemoryType, MemoryUpdated, upcast_decisions
from events.turns import Principal


class MemoryRollbackRequested(Event):
    """Restore memory `memory_id` of `user_id` to its version `to_version`."""

    event_type: Literal["MemoryRollbackRequested"] = "MemoryRollbackRequested"
    schema_version: Literal[1] = 1

    user_id: Identifier
    agent_id: Identifier | None = None
    memory_type: MemoryType
    memory_id: str = Field(min_length=1, max_length=200)
    to_version: int = Field(ge=1)
    requested_by: str = Field(min_length=1, max_length=200)
    """Who asked: an API key's principal (`service_account:…`), an operator (`cli:alice`) …"""
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    principal: Principal | None = None

    @property
    def key(self) -> str:
        return self.user_id


class MemoryRolledBack(Event):
    """A rollback request decided: the new version restoring the target one, or why not.

    `event_id` derives from the request's id and the type, so the first record per request wins.
    """

    event_type: Literal["MemoryRolledBack"] = "MemoryRolledBack"
    schema_version: Literal[1] = 1

    rollback_id: str = Field(min_length=1, max_length=200)
    user_id: Identifier
    memory_type: MemoryType
    memory_id: str = Field(min_length=1, max_length=200)
    to_version: int = Field(ge=1)
    requested_by: str = Field(min_length=1, max_length=200)
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    decisions: tuple[MemoryDecision, ...] = ()
    refused: str | None = Field(default=None, max_length=1_000)
    """Why nothing was restored (None when `decisions` holds the restoring version — or held
    it: a decision whose memory's key was destroyed is dropped when the record is read)."""

    @model_validator(mode="before")
    @classmethod
    def _current_decisions(cls, stored: Any) -> Any:
        return upcast_decisions(stored)

    @model_validator(mode="after")
    def _one_update_of_this_memory(self) -> MemoryRolledBack:
        if len(self.decisions) > 1:
            raise ValueError("a rollback decides at most one new version")
        for decision in self.decisions:
            if not isinstance(decision, MemoryUpdated):
                raise ValueError("a rollback's decision is a MemoryUpdated")
            if (
                decision.user_id != self.user_id
                or decision.memory_type != self.memory_type
                or decision.memory_id != self.memory_id
            ):
                raise ValueError(f"the decision is not about {self.memory_id!r} of this user")
        if self.refused is not None and self.decisions:
            raise ValueError("a refused rollback restores no version")
        return self

    @property
    def key(self) -> str:
        return self.user_id

    @property
    def memory_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(decision.memory_id for decision in self.decisions))
