"""Consolidation: one user's near-duplicate or contradicting memories merged or superseded.

`MemoryConsolidationRequested` travels on the snapshots topic keyed by user, like a rollback, so
it is ordered with the user's snapshots and saves and reaches every memory type's stage. Each
stage of a requested type decides (`handlers.consolidation`) and writes one
`MemoriesConsolidated` record on the memories topic: the run's decisions as one record — the
surviving memories' new versions (ordinary `MemoryUpdated`s whose `reason` names the
consolidation), the memories retired into them (`MemoryRetired`, ids only), what each cluster
was decided, and what it cost.

A retired memory stops being current (search, `memories()`, context, reconciliation no longer
see it); its versions stay, the last one saying which memory it went into and why
(docs/architecture.md, "Consolidation"). Nothing here but the decisions' own fields carries
content: ids, counts, who asked and why.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from events.base import Event, Identifier, UtcDatetime
from events.forgetting import MAX_REASON_CHARS
from events.memories import LLMUsage, MemoryDecision, MemoryType, MemoryUpdated, upcast_decisions
from events.turns import Principal

DEFAULT_MAX_CALLS = 20
"""LLM calls one consolidation run may make per memory type unless the caller says otherwise."""
MAX_MAX_CALLS = 40
"""The largest budget: a run's record holds every decision it made (at most one new version per
call), and 40 merged versions with 1,536-dimension vectors stay well under the 1 MB record
limit (`events.codec.MAX_EVENT_BYTES`). A user with more to tidy runs it again."""
MAX_CLUSTERS = 1_000
"""Clusters a result lists at most (found beyond it are counted, not listed)."""

ClusterAction = Literal["merge", "supersede", "keep", "unanswered", "skipped"]
"""What became of one cluster: merged into one memory, the contradicted ones superseded by the
current truth, kept as distinct facts, no valid answer (kept), or not asked (the budget)."""


class MemoryConsolidationRequested(Event):
    """Consolidate the current memories of `user_id` of `memory_types` (all: every type)."""

    event_type: Literal["MemoryConsolidationRequested"] = "MemoryConsolidationRequested"
    schema_version: Literal[1] = 1

    user_id: Identifier
    memory_types: tuple[MemoryType, ...] = ()
    """The types to consolidate; empty: every type whose extraction is enabled."""
    requested_by: str = Field(min_length=1, max_length=200)
    """Who asked: an API key's principal (`service_account:…`), an operator (`cli:alice`) …"""
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    max_calls: int = Field(default=DEFAULT_MAX_CALLS, ge=0, le=MAX_MAX_CALLS)
    """The budget: LLM calls each type's run may make (a re-ask counts)."""
    principal: Principal | None = None

    @property
    def key(self) -> str:
        return self.user_id


class MemoryRetired(BaseModel):
    """Memory `memory_id` (at `version`, its current one) stops being current: it went `into`
    another memory of the same user, type and subject. Ids only; the reason is the surviving
    version's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: str = Field(min_length=1, max_length=200)
    memory_id: str = Field(min_length=1, max_length=200)
    version: int = Field(ge=1)
    user_id: Identifier
    memory_type: MemoryType
    into: str = Field(min_length=1, max_length=200)
    into_version: int = Field(ge=1)
    action: Literal["merge", "supersede"]
    occurred_at: UtcDatetime


class ClusterOutcome(BaseModel):
    """One cluster of a run and what became of it (ids only)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_ids: tuple[str, ...] = Field(min_length=2)
    action: ClusterAction
    survivor: str | None = None


class MemoriesConsolidated(Event):
    """One type's consolidation run for one request, decided: every decision as one record.

    `event_id` derives from the request's id and the type, so the first record per request and
    type wins."""

    event_type: Literal["MemoriesConsolidated"] = "MemoriesConsolidated"
    schema_version: Literal[1] = 1

    consolidation_id: str = Field(min_length=1, max_length=200)
    user_id: Identifier
    memory_type: MemoryType
    requested_by: str = Field(min_length=1, max_length=200)
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)
    max_calls: int = Field(ge=0, le=MAX_MAX_CALLS)
    requested_types: tuple[MemoryType, ...] = ()
    """The request's `memory_types` (empty: every enabled type), so a reader knows how many
    runs answer it."""
    decisions: tuple[MemoryDecision, ...] = ()
    """The surviving memories' new versions (`MemoryUpdated`)."""
    retired: tuple[MemoryRetired, ...] = ()
    clusters: tuple[ClusterOutcome, ...] = Field(default=(), max_length=MAX_CLUSTERS)
    clusters_found: int = Field(default=0, ge=0)
    clusters_asked: int = Field(default=0, ge=0)
    clusters_skipped: int = Field(default=0, ge=0)
    """Clusters not asked about because the run's `max_calls` was spent."""
    usage: LLMUsage = LLMUsage()
    prompt_version: str | None = Field(default=None, max_length=100)
    unchanged: str | None = Field(default=None, max_length=1_000)
    """Why the run changed nothing (no clusters, the budget spent, every cluster kept …);
    None when it merged or superseded something."""

    @model_validator(mode="before")
    @classmethod
    def _current_decisions(cls, stored: Any) -> Any:
        return upcast_decisions(stored)

    @model_validator(mode="after")
    def _only_this_users_memories_of_this_type(self) -> MemoriesConsolidated:
        for decision in self.decisions:
            if not isinstance(decision, MemoryUpdated):
                raise ValueError("a consolidation's decisions are MemoryUpdated")
            if decision.user_id != self.user_id or decision.memory_type != self.memory_type:
                raise ValueError(f"decision {decision.event_id} is not of this user and type")
        for retired in self.retired:
            if retired.user_id != self.user_id or retired.memory_type != self.memory_type:
                raise ValueError(f"retirement of {retired.memory_id} is not of this user and type")
        if self.unchanged is not None and (self.decisions or self.retired):
            raise ValueError("a consolidation that changed nothing has no decisions")
        survivors = {d.memory_id for d in self.decisions}
        for retired in self.retired:
            if retired.memory_id in survivors:
                raise ValueError(f"memory {retired.memory_id} both survives and is retired")
        return self

    @property
    def key(self) -> str:
        return self.user_id

    @property
    def memory_ids(self) -> tuple[str, ...]:
        """Every memory the run changed: the survivors and the retired."""
        changed = [d.memory_id for d in self.decisions] + [r.memory_id for r in self.retired]
        return tuple(dict.fromkeys(changed))
