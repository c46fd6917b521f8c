"""Long-term memory events: ADD, UPDATE and REINFORCE decisions of reconciliation.

All memory events of one user travel keyed by `user_id`, so a user's memory history is ordered.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from events.base import Event, Identifier, UtcDatetime
from events.upcasting import upcast

MEMORY_TYPE_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"
MemoryType = Annotated[str, Field(pattern=MEMORY_TYPE_PATTERN)]
"""A memory type's name: one of the built-in `MEMORY_TYPES`, or a custom type a project declares
(`memory.custom_types`, docs/architecture.md, "Custom memory types"). Which names a deployment
knows is configuration, so events accept any well-formed name."""
MEMORY_TYPES: tuple[MemoryType, ...] = ("semantic", "episodic", "procedural", "taxonomic")
"""The built-in memory types, each with its own extractor in `handlers.extraction`."""
Owner = Literal["user", "agent"]
USER_SUBJECT = "the user"
"""The subject of every memory about the current user (another person's is their name)."""
ASSISTANT_SUBJECT = "assistant"
"""The subject of what the AI assistant provided (owner `agent`)."""
MemorySource = Literal["extraction", "sdk"]

_MEMORY_NAMESPACE = uuid.UUID("0b6f0c1e-8c55-4c8e-b7f0-5d3f7a2e4c91")


def derived_id(*parts: str | int) -> str:
    """A deterministic id from its parts, so replays of the same decision get the same ids."""
    return str(uuid.uuid5(_MEMORY_NAMESPACE, "|".join(str(part) for part in parts)))


class MemoryContent(BaseModel):
    """What a memory says and whose it is.

    `subject` is who the memory is about ("the user", "John", "assistant"); `owner` is `user` for
    facts about people (the current user or another named human) and `agent` for what the AI
    assistant provided. `attributes` holds the type's own fields (episode title, procedure steps,
    taxonomy parent …).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject: str = Field(min_length=1, max_length=200)
    owner: Owner
    text: str = Field(min_length=1, max_length=4_000)
    category: str | None = Field(default=None, max_length=100)
    attributes: dict[str, Any] = Field(default_factory=dict)


class Provenance(BaseModel):
    """Where a memory event came from: the prompt and the models that produced it.

    `prompt_version` names the extraction prompt (None for a direct save); `llm_model` the model
    that extracted it and is asked about ambiguous cases; `reconciled_by` says how the decision
    was taken (`rule`: by similarity alone, `llm`: the LLM chose among the candidates it was
    shown). Vectors are only ever compared with vectors of the same `embedding_model`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt_version: str | None = Field(default=None, max_length=100)
    llm_model: str | None = Field(default=None, max_length=200)
    embedding_model: str = Field(min_length=1, max_length=200)
    embedding_dimensions: int = Field(ge=1)
    reconciled_by: Literal["rule", "llm"] = "rule"
    extractor: str | None = Field(default=None, max_length=64)
    """The named extractor (`extractor:` in the project's configuration) of the stage that
    decided; None in records written before extractors had names."""
    extractor_digest: str | None = Field(default=None, pattern=r"^[0-9a-f]{12}$")
    """A digest of the settings that name stood for then (model, temperature, prompt versions,
    types, thresholds): the same name edited in place gets another digest."""


class LLMUsage(BaseModel):
    """What one extraction or save cost in LLM calls and tokens (as the endpoint counted them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    calls: int = Field(default=0, ge=0)
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)

    def __add__(self, other: LLMUsage) -> LLMUsage:
        return LLMUsage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class Evidence(BaseModel):
    """Where a memory (or a reinforcement of it) was learned."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: MemorySource
    snapshot_id: str | None = None
    session_id: str | None = None
    observed_at: UtcDatetime


class _MemoryEvent(Event):
    memory_id: str = Field(min_length=1, max_length=200)
    memory_type: MemoryType
    user_id: Identifier
    agent_id: Identifier | None = None
    provenance: Provenance | None
    """None only for events written before 0.2 (schema version 1)."""

    @property
    def key(self) -> str:
        return self.user_id


class MemoryAdded(_MemoryEvent):
    """A new memory, version 1."""

    event_type: Literal["MemoryAdded"] = "MemoryAdded"
    schema_version: Literal[2] = 2

    version: Literal[1] = 1
    content: MemoryContent
    embedding: tuple[float, ...] = ()
    evidence: Evidence
    expires_at: UtcDatetime | None = None
    """When this version expires and the memory is forgotten (None: never); see
    docs/architecture.md, "Expiry"."""


class MemoryUpdated(_MemoryEvent):
    """A new version of a memory superseded `supersedes_version` (which is kept)."""

    event_type: Literal["MemoryUpdated"] = "MemoryUpdated"
    schema_version: Literal[2] = 2

    version: int = Field(ge=2)
    supersedes_version: int = Field(ge=1)
    content: MemoryContent
    embedding: tuple[float, ...] = ()
    evidence: Evidence
    reason: str | None = Field(default=None, max_length=1_000)
    expires_at: UtcDatetime | None = None
    """When this version expires (None: never)."""


class MemoryReinforced(_MemoryEvent):
    """New evidence restated an existing memory version: no copy, the count goes up."""

    event_type: Literal["MemoryReinforced"] = "MemoryReinforced"
    schema_version: Literal[2] = 2

    version: int = Field(ge=1)
    evidence: Evidence
    merged_attributes: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = Field(default=None, max_length=1_000)


MemoryEvent = MemoryAdded | MemoryUpdated | MemoryReinforced
"""A reconciliation decision about one memory."""


MemoryDecision = Annotated[
    MemoryAdded | MemoryUpdated | MemoryReinforced, Field(discriminator="event_type")
]
"""A decision as carried inside a result record (`SnapshotExtracted`, `MemorySaved`)."""


def upcast_decisions(payload: Any) -> Any:
    """Lift the memory events nested in a result record's `decisions` to their current schema."""
    if isinstance(payload, dict) and isinstance(payload.get("decisions"), list):
        decisions = [upcast(d) if isinstance(d, dict) else d for d in payload["decisions"]]
        return {**payload, "decisions": decisions}
    return payload
