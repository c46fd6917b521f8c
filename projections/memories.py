"""Projecting memory events: every version of every memory, and the append-only event log.

Idempotent: each view update is guarded so that re-delivering an event changes nothing, and the
event log has the event id as its `_id`. The view is written before the log entry, so a crash in
between is repaired by the redelivery. A version or an event id that already holds other content
raises `IdCollision` (see `projections.write_once`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from events.memories import MemoryAdded, MemoryEvent, MemoryReinforced, MemoryUpdated
from projections.profiles import apply_profile_fact
from projections.store import CHANGES_KEPT, MEMORIES, MEMORY_EVENTS, MEMORY_WRITES
from projections.vectors import pack_vector
from projections.write_once import fingerprint_of
from projections.writes import Writes


def version_id(memory_id: str, version: int) -> str:
    """The `_id` of one version of a memory in the `memories` collection."""
    return f"{memory_id}:v{version}"


def project_memory_event(db: Writes, event: MemoryEvent) -> None:
    """Apply one memory event to `memories` and `profiles`, append it to `memory_events`, then
    count the write in `memory_writes` (search's change signal)."""
    if isinstance(event, MemoryAdded | MemoryUpdated):
        _insert_version(db, event)
        apply_profile_fact(db, event)
    if isinstance(event, MemoryUpdated):
        _supersede(db, event)
    if isinstance(event, MemoryReinforced):
        _reinforce(db, event)
    _append_to_log(db, event)
    count_changes(db, event.user_id, [event.memory_id])


def _evidence(event: MemoryEvent) -> dict[str, Any]:
    return {"event_id": event.event_id, **event.evidence.model_dump()}


def _insert_version(db: Writes, event: MemoryAdded | MemoryUpdated) -> None:
    content = event.content
    document = {
        "memory_id": event.memory_id,
        "version": event.version,
        "memory_type": event.memory_type,
        "user_id": event.user_id,
        "agent_id": event.agent_id,
        "subject": content.subject,
        "owner": content.owner,
        "text": content.text,
        "category": content.category,
        "attributes": content.attributes,
        "embedding": pack_vector(event.embedding),
        "embedding_model": event.provenance.embedding_model if event.provenance else None,
        "provenance": event.provenance.model_dump() if event.provenance else None,
        "status": "current",
        "superseded_by": None,
        "retired_into": None,
        "reinforcement_count": 0,
        "evidence": [_evidence(event)],
        "expires_at": event.expires_at,
        "created_by_event": event.event_id,
        "created_at": event.occurred_at,
        "updated_at": event.occurred_at,
    }
    db.insert_once(
        MEMORIES, version_id(event.memory_id, event.version), document, _fingerprint(event)
    )


def _supersede(db: Writes, event: MemoryUpdated) -> None:
    db.update(
        MEMORIES,
        {"_id": version_id(event.memory_id, event.supersedes_version), "status": "current"},
        {
            "$set": {
                "status": "superseded",
                "superseded_by": {
                    "version": event.version,
                    "event_id": event.event_id,
                    "text": event.content.text,
                    "reason": event.reason,
                    "at": event.occurred_at,
                },
                "updated_at": event.occurred_at,
            }
        },
    )


def _reinforce(db: Writes, event: MemoryReinforced) -> None:
    update: dict[str, Any] = {
        "$inc": {"reinforcement_count": 1},
        "$push": {"evidence": _evidence(event)},
        "$set": {"updated_at": event.occurred_at},
    }
    for name, value in event.merged_attributes.items():
        update["$set"][f"attributes.{name}"] = value
    db.update(
        MEMORIES,
        {
            "_id": version_id(event.memory_id, event.version),
            "evidence.event_id": {"$ne": event.event_id},
        },
        update,
    )


def _append_to_log(db: Writes, event: MemoryEvent) -> None:
    entry = {
        "event_type": event.event_type,
        "memory_id": event.memory_id,
        "memory_type": event.memory_type,
        "user_id": event.user_id,
        "occurred_at": event.occurred_at,
        "event": event.model_dump(mode="json"),
    }
    db.insert_once(MEMORY_EVENTS, event.event_id, entry, _fingerprint(event))


def count_changes(db: Writes, user_id: str, memory_ids: Sequence[str]) -> None:
    """Bump the user's write count by one per memory and note the memories, after they changed.

    Every delivery counts, a redelivery too: the count only has to change whenever the memories
    may have (a spurious change costs search one memory's refresh), and a crash before this
    write is repaired by the redelivery, as for the log entry. Search reads the last `count`
    increase's worth of `changed` (`memstream.sdk.read_model`), so the two move together."""
    if not memory_ids:
        return
    db.update(
        MEMORY_WRITES,
        {"_id": user_id},
        {
            "$inc": {"count": len(memory_ids)},
            "$push": {"changed": {"$each": list(memory_ids), "$slice": -CHANGES_KEPT}},
        },
        upsert=True,
    )


def _fingerprint(event: MemoryEvent) -> str:
    return fingerprint_of(event.model_dump())
