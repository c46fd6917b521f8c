"""Direct saves: the application writes a memory itself, through the same reconciliation.

`MemorySaveRequested` travels on the snapshots topic keyed by user, so it is ordered with the
user's snapshots and reaches the stage of its memory type whether that type is extracted
automatically or not. The stage embeds it, reconciles it like an extracted memory and writes one
`MemorySaved` record with its decision on the memories topic.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from events.base import Event, Identifier, UtcDatetime
from events.memories import LLMUsage, MemoryContent, MemoryDecision, MemoryType, upcast_decisions
from events.turns import Principal


class MemorySaveRequested(Event):
    """The application asked to remember `content` as a memory of `memory_type`."""

    event_type: Literal["MemorySaveRequested"] = "MemorySaveRequested"
    schema_version: Literal[1] = 1

    user_id: Identifier
    agent_id: Identifier | None = None
    session_id: Identifier | None = None
    memory_type: MemoryType
    content: MemoryContent
    principal: Principal | None = None
    expires_at: UtcDatetime | None = None
    """When the saved memory expires (None: the type's retention, if any)."""

    @property
    def key(self) -> str:
        return self.user_id


class MemorySaved(Event):
    """A direct save went through reconciliation: the decision it led to, in one record.

    `event_id` derives from the request's id and the type, so the first record per save wins.
    """

    event_type: Literal["MemorySaved"] = "MemorySaved"
    schema_version: Literal[1] = 1

    save_id: str = Field(min_length=1, max_length=200)
    user_id: Identifier
    agent_id: Identifier | None = None
    memory_type: MemoryType
    decisions: tuple[MemoryDecision, ...] = ()
    usage: LLMUsage = LLMUsage()

    @model_validator(mode="before")
    @classmethod
    def _current_decisions(cls, stored: Any) -> Any:
        return upcast_decisions(stored)

    @model_validator(mode="after")
    def _decisions_belong_to_this_save(self) -> MemorySaved:
        for index, decision in enumerate(self.decisions):
            if decision.user_id != self.user_id or decision.memory_type != self.memory_type:
                raise ValueError(
                    f"decisions[{index}] is not a {self.memory_type} memory of {self.user_id!r}"
                )
        return self

    @property
    def key(self) -> str:
        return self.user_id

    @property
    def memory_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(decision.memory_id for decision in self.decisions))
