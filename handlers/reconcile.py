"""Reconciliation: turning extracted memories into memory events.

This first version only ADDs: each extracted memory becomes a new memory whose id is derived from
the snapshot, the memory type and the memory's position in the extraction, so replaying a snapshot
re-derives the same ids and projections stay idempotent. UPDATE and REINFORCE decisions against
existing memories are the next step (see CHANGELOG).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from events.memories import Evidence, MemoryAdded, MemoryContent, MemoryType, derived_id
from events.snapshots import SnapshotExtracted, SnapshotPromoted


def additions(
    snapshot: SnapshotPromoted,
    memory_type: MemoryType,
    memories: Sequence[MemoryContent],
    embeddings: Sequence[Sequence[float]],
    *,
    now: datetime,
) -> list[MemoryAdded]:
    """One `MemoryAdded` per extracted memory, with deterministic memory and event ids."""
    if len(memories) != len(embeddings):
        raise ValueError(f"{len(memories)} memories but {len(embeddings)} embeddings")
    evidence = Evidence(
        source="extraction",
        snapshot_id=snapshot.event_id,
        session_id=snapshot.session_id,
        observed_at=snapshot.occurred_at,
    )
    events = []
    for index, (content, vector) in enumerate(zip(memories, embeddings, strict=True)):
        memory_id = derived_id("memory", memory_type, snapshot.event_id, index)
        events.append(
            MemoryAdded(
                event_id=derived_id("added", memory_id),
                occurred_at=now,
                memory_id=memory_id,
                memory_type=memory_type,
                user_id=snapshot.user_id,
                agent_id=snapshot.agent_id,
                content=content,
                embedding=tuple(vector),
                evidence=evidence,
            )
        )
    return events


def extraction_finished(
    snapshot: SnapshotPromoted,
    memory_type: MemoryType,
    added: Sequence[MemoryAdded],
    *,
    attempts: int,
    failure: str | None,
    now: datetime,
) -> SnapshotExtracted:
    """The event that closes one memory type's extraction of a snapshot."""
    return SnapshotExtracted(
        event_id=derived_id("extracted", snapshot.event_id, memory_type),
        occurred_at=now,
        snapshot_id=snapshot.event_id,
        user_id=snapshot.user_id,
        session_id=snapshot.session_id,
        memory_type=memory_type,
        memory_ids=tuple(event.memory_id for event in added),
        attempts=attempts,
        failure=failure,
    )
