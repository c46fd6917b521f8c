"""Request and response bodies of the HTTP API (their JSON Schemas are the OpenAPI document's)."""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field

from events.base import Identifier, UtcDatetime
from events.consolidations import DEFAULT_MAX_CALLS, MAX_MAX_CALLS
from events.forgetting import MAX_REASON_CHARS
from events.memories import USER_SUBJECT, MemoryType, Owner
from handlers.recall import PAST_MESSAGES
from handlers.search import SearchMode
from memstream.sdk.search_filters import SearchFilters

UserField = Field(
    default=None,
    description="The end user. An application key must name it; a service-account key's "
    "memory user is the account itself, so a user_id it sends is ignored (and counted).",
)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecordTurns(_Body):
    """Messages to append as turns, OpenAI- or Anthropic-style (`role`, `content`, `name`;
    Anthropic content blocks; OpenAI tool messages)."""

    user_id: Identifier | None = UserField
    session_id: Identifier
    agent_id: Identifier | None = None
    messages: list[dict[str, Any]] = Field(min_length=1, max_length=1000)
    occurred_at: UtcDatetime | None = None


class TurnsRecorded(BaseModel):
    user_id: str
    session_id: str
    turn_ids: list[str]


class FlushSession(_Body):
    user_id: Identifier | None = UserField
    session_id: Identifier


class SessionFlushed(BaseModel):
    user_id: str
    session_id: str


class SaveMemory(_Body):
    """A memory to save directly (reconciled like an extracted one)."""

    user_id: Identifier | None = UserField
    memory_type: MemoryType
    text: str = Field(min_length=1, max_length=4000)
    subject: str = Field(default=USER_SUBJECT, min_length=1, max_length=200)
    owner: Owner = "user"
    category: str | None = Field(default=None, max_length=100)
    attributes: dict[str, Any] = Field(default_factory=dict)
    agent_id: Identifier | None = None
    session_id: Identifier | None = None
    expires_at: UtcDatetime | None = None
    """When the saved memory is forgotten (with a timezone); default: the type's retention."""


class MemorySaveAccepted(BaseModel):
    user_id: str
    save_id: str


class Search(_Body):
    user_id: Identifier | None = UserField
    query: str = Field(min_length=1, max_length=4000)
    types: list[MemoryType] | None = None
    limit: int = Field(default=10, ge=1, le=100)
    mode: SearchMode = "hybrid"
    agent_id: Identifier | None = None
    subject: str | None = Field(default=None, max_length=200)
    owner: Owner | None = None
    category: str | None = Field(default=None, max_length=100)
    since: UtcDatetime | None = None
    until: UtcDatetime | None = None

    def filters(self) -> SearchFilters:
        """The body's filters (`memstream.sdk.search_filters`: each key has a field here)."""
        chosen = self.model_dump(include=set(SearchFilters.__optional_keys__))
        return cast(SearchFilters, chosen)


class SearchResults(BaseModel):
    user_id: str
    results: list[dict[str, Any]]


class BuildContext(_Body):
    user_id: Identifier | None = UserField
    query: str = Field(min_length=1, max_length=4000)
    session_id: Identifier | None = None
    max_chars: int = Field(default=4000, ge=200, le=100_000)
    per_type: int = Field(default=5, ge=0, le=50)
    agent_id: Identifier | None = None
    past_messages: int = Field(default=PAST_MESSAGES, ge=0, le=50)


class Context(BaseModel):
    user_id: str
    context: str


class MemoryPage(BaseModel):
    user_id: str
    items: list[dict[str, Any]]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )


class MemoryHistory(BaseModel):
    user_id: str
    memory_id: str
    versions: list[dict[str, Any]]


class Profile(BaseModel):
    user_id: str
    profile: dict[str, Any] | None


class Status(BaseModel):
    key_id: str
    principal: dict[str, Any]
    user_prefix: str | None
    ignored_user_ids: int
    pipeline: dict[str, Any]


class ForgetAccepted(BaseModel):
    """A forget request was written to the log; the stages carry it out in order."""

    user_id: str
    request_id: str = Field(description="The request's id: its receipt's id (GET /v1/erasures/…)")


class ErasureReceipt(BaseModel):
    """What the stages erased for one forget request (counts only, never content)."""

    model_config = ConfigDict(extra="allow")

    request_id: str
    kind: str = Field(description="memory, session or user")
    user_id: str
    complete: bool = Field(description="Every stage that must act on the request has left its step")
    steps: dict[str, dict[str, Any]] = Field(default_factory=dict)
    expected_steps: dict[str, int] = Field(default_factory=dict)
    seen_steps: dict[str, int] = Field(default_factory=dict)
    keys_destroyed: dict[str, int] = Field(
        default_factory=dict, description="Data keys destroyed (crypto-shredding), per step"
    )


class Erasures(BaseModel):
    user_id: str
    erasures: list[ErasureReceipt]


class RollbackMemory(_Body):
    """Restore a memory to one of its earlier versions (who asks: the key's principal)."""

    to_version: int = Field(ge=1, description="The version whose text, vector and expiry return")
    reason: str = Field(
        default="", max_length=MAX_REASON_CHARS, description="Why (kept, shown by history)"
    )


class RollbackAccepted(BaseModel):
    """A rollback request was written to the log; the memory's stage decides it in order."""

    user_id: str
    rollback_id: str = Field(description="Its id (GET /v1/users/{user_id}/rollbacks/{id})")


class RollbackResult(BaseModel):
    """What a rollback did: the version it made, or why it was refused."""

    model_config = ConfigDict(extra="allow")

    rollback_id: str
    user_id: str
    memory_id: str
    to_version: int
    requested_by: str
    reason: str
    refused: str | None
    versions: list[int]


class ConsolidateMemories(_Body):
    """Consolidate the user's memories (who asks: the key's principal)."""

    memory_types: list[MemoryType] | None = Field(
        default=None, description="The types to consolidate (default: every enabled type)"
    )
    max_calls: int = Field(
        default=DEFAULT_MAX_CALLS,
        ge=0,
        le=MAX_MAX_CALLS,
        description="LLM calls each type's run may make (one per cluster; a re-ask counts)",
    )
    reason: str = Field(default="", max_length=MAX_REASON_CHARS, description="Why (kept)")


class ConsolidationAccepted(BaseModel):
    """A consolidation request was written to the log; each type's stage decides it in order."""

    user_id: str
    consolidation_id: str = Field(
        description="Its id (GET /v1/users/{user_id}/consolidations/{id})"
    )


class ConsolidationResult(BaseModel):
    """What a consolidation did so far: one run per memory type, each with its clusters, the
    memories it merged or superseded and retired, and its cost."""

    user_id: str
    consolidation_id: str
    complete: bool = Field(description="Every requested type's run is decided and projected")
    runs: list[dict[str, Any]]
