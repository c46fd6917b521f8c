"""Rollback: restore a memory to one of its earlier versions (docs/architecture.md, "Rollback").

Pure: given the request, the memory's current version (the stage's view: the read model with its
own unprojected records laid over it) and the stored versions of the memory id, the decision is
a `MemoryUpdated` carrying the target version's content, vector and expiry as the next version,
or the reason it is refused. Refusals are decisions, not poison: the stage writes them in the
result record (`refused`), so the caller can read why and the worker goes on.

Ids derive from the request's id, so a request read again decides the same record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from events.forgetting import MemoriesForgotten
from events.memories import (
    Evidence,
    MemoryAdded,
    MemoryContent,
    MemoryDecision,
    MemoryType,
    MemoryUpdated,
    Provenance,
    derived_id,
)
from events.rollbacks import MemoryRollbackRequested, MemoryRolledBack
from handlers.known_memory import KnownMemory
from handlers.known_state import OwnRecord

MAX_DECISION_REASON_CHARS = 1_000


@dataclass(frozen=True)
class StoredVersion:
    """One version of a memory as the read model (or the stage's own records) holds it."""

    memory_id: str
    version: int
    user_id: str
    memory_type: MemoryType
    content: MemoryContent
    embedding: tuple[float, ...]
    embedding_model: str
    expires_at: datetime | None


def rollback_result_id(request_id: str, memory_type: MemoryType) -> str:
    """The event id of a rollback's result: one per request."""
    return derived_id("rolled-back", request_id, memory_type)


def versions_in(records: Iterable[OwnRecord], memory_id: str) -> list[StoredVersion]:
    """The versions of `memory_id` that a stage's own records created (the read model may not
    hold them yet)."""
    found = []
    for record in records:
        if isinstance(record, MemoriesForgotten):
            continue
        for decision in record.decisions:
            if decision.memory_id == memory_id and isinstance(
                decision, MemoryAdded | MemoryUpdated
            ):
                found.append(stored_version(decision))
    return found


def stored_version(event: MemoryAdded | MemoryUpdated) -> StoredVersion:
    """The version `event` created."""
    return StoredVersion(
        memory_id=event.memory_id,
        version=event.version,
        user_id=event.user_id,
        memory_type=event.memory_type,
        content=event.content,
        embedding=event.embedding,
        embedding_model=event.provenance.embedding_model if event.provenance else "",
        expires_at=event.expires_at,
    )


def rollback_decision(
    request: MemoryRollbackRequested,
    current: KnownMemory | None,
    versions: Iterable[StoredVersion],
    provenance: Provenance,
) -> MemoryUpdated | str:
    """The version restoring `request.to_version`, or why there is none.

    `current` is the user's current version of the memory among the stage's memories of its
    type (None: unknown, forgotten or expired away); `versions` every stored version of the
    memory id, whoever's; `provenance` the stage's stamp (its embedding fields are replaced by
    the restored vector's).
    """
    stored = list(versions)
    foreign = [
        v for v in stored if v.user_id != request.user_id or v.memory_type != request.memory_type
    ]
    if foreign:
        return f"memory {request.memory_id} is not a {request.memory_type} memory of this user"
    if current is None:
        return f"unknown memory {request.memory_id} (never stored, forgotten or expired)"
    if current.expires_at is not None and current.expires_at <= request.occurred_at:
        return f"memory {request.memory_id} expired at {current.expires_at.isoformat()}"
    if request.to_version == current.version:
        return f"memory {request.memory_id} is at version {current.version} already"
    target = next((v for v in stored if v.version == request.to_version), None)
    if target is None or request.to_version > current.version:
        return f"memory {request.memory_id} has no version {request.to_version}"
    if target.expires_at is not None and target.expires_at <= request.occurred_at:
        return (
            f"version {target.version} of memory {request.memory_id} expired at "
            f"{target.expires_at.isoformat()}"
        )
    stamp = provenance
    if target.embedding and target.embedding_model:
        stamp = provenance.model_copy(
            update={
                "embedding_model": target.embedding_model,
                "embedding_dimensions": len(target.embedding),
                "prompt_version": None,
                "reconciled_by": "rule",
            }
        )
    version = current.version + 1
    return MemoryUpdated(
        event_id=derived_id("rolled-back", request.event_id, request.memory_id, version),
        occurred_at=request.occurred_at,
        memory_id=request.memory_id,
        memory_type=request.memory_type,
        user_id=request.user_id,
        agent_id=current.agent_id,
        provenance=stamp,
        version=version,
        supersedes_version=current.version,
        content=target.content,
        embedding=target.embedding,
        evidence=Evidence(source="sdk", observed_at=request.occurred_at),
        reason=rollback_reason(request),
        expires_at=target.expires_at,
    )


def rollback_reason(request: MemoryRollbackRequested) -> str:
    """The restoring version's `reason`: the rollback, who asked and why."""
    said = f"rollback to version {request.to_version} requested by {request.requested_by}"
    if request.reason:
        said = f"{said}: {request.reason}"
    if len(said) > MAX_DECISION_REASON_CHARS:
        said = said[: MAX_DECISION_REASON_CHARS - 1] + "…"
    return said


def rollback_record(
    request: MemoryRollbackRequested, decided: MemoryUpdated | str
) -> MemoryRolledBack:
    """The one record the stage writes for `request`."""
    decisions: tuple[MemoryDecision, ...] = (decided,) if isinstance(decided, MemoryUpdated) else ()
    return MemoryRolledBack(
        event_id=rollback_result_id(request.event_id, request.memory_type),
        occurred_at=request.occurred_at,
        rollback_id=request.event_id,
        user_id=request.user_id,
        memory_type=request.memory_type,
        memory_id=request.memory_id,
        to_version=request.to_version,
        requested_by=request.requested_by,
        reason=request.reason,
        decisions=decisions,
        refused=None if decisions else str(decided)[:1_000],
    )
