"""Projecting consolidations: the run's document, the survivors' versions, the retirements.

A `MemoriesConsolidated` record claims its document in `consolidations` (one per request and
type, by its fingerprint, as a save or a rollback does); only the record holding the claim is
expanded. Its decisions are ordinary `MemoryUpdated`s (`projections.memories`). Each retirement
turns the retired memory's current version into `status: "retired"` with `retired_into` (the
memory and version it went into, how and by which consolidation) and appends a `MemoryRetired`
entry to `memory_events`: the memory leaves everything that reads current memories (search,
`memories()`, context, reconciliation) and keeps every version in its history. Idempotent: the
update only matches a current version, the log entry is written once.
"""

from __future__ import annotations

import logging

from events.consolidations import MemoriesConsolidated, MemoryRetired
from projections.memories import count_changes, project_memory_event, version_id
from projections.store import CONSOLIDATIONS, MEMORIES, MEMORY_EVENTS
from projections.write_once import fingerprint_of
from projections.writes import Writes

log = logging.getLogger(__name__)


def project_consolidation(db: Writes, result: MemoriesConsolidated) -> bool:
    """Apply a consolidation run if its record is the first for its request and type; True if
    so. A run that changed nothing leaves its document (the caller reads why and the cost)."""
    record = {
        "consolidation_id": result.consolidation_id,
        "user_id": result.user_id,
        "memory_type": result.memory_type,
        "requested_by": result.requested_by,
        "reason": result.reason,
        "max_calls": result.max_calls,
        "requested_types": list(result.requested_types),
        "memory_ids": list(result.memory_ids),
        "decision_ids": [decision.event_id for decision in result.decisions],
        "survivors": [{"memory_id": d.memory_id, "version": d.version} for d in result.decisions],
        "retired": [
            {
                "memory_id": r.memory_id,
                "version": r.version,
                "into": r.into,
                "action": r.action,
                "event_id": r.event_id,
            }
            for r in result.retired
        ],
        "clusters": [cluster.model_dump() for cluster in result.clusters],
        "clusters_found": result.clusters_found,
        "clusters_asked": result.clusters_asked,
        "clusters_skipped": result.clusters_skipped,
        "usage": result.usage.model_dump(),
        "prompt_version": result.prompt_version,
        "unchanged": result.unchanged,
        "at": result.occurred_at,
    }
    fingerprint = fingerprint_of(result.model_dump())
    if not db.claim(CONSOLIDATIONS, result.event_id, "", record, fingerprint):
        log.warning("ignored a later result for consolidation %s", result.consolidation_id)
        return False
    for decision in result.decisions:
        project_memory_event(db, decision)
    for retired in result.retired:
        _retire(db, retired, result.consolidation_id)
    return True


def _retire(db: Writes, retired: MemoryRetired, consolidation_id: str) -> None:
    db.update(
        MEMORIES,
        {"_id": version_id(retired.memory_id, retired.version), "status": "current"},
        {
            "$set": {
                "status": "retired",
                "retired_into": {
                    "memory_id": retired.into,
                    "version": retired.into_version,
                    "action": retired.action,
                    "event_id": retired.event_id,
                    "consolidation_id": consolidation_id,
                    "at": retired.occurred_at,
                },
                "updated_at": retired.occurred_at,
            }
        },
    )
    entry = {
        "event_type": "MemoryRetired",
        "memory_id": retired.memory_id,
        "memory_type": retired.memory_type,
        "user_id": retired.user_id,
        "occurred_at": retired.occurred_at,
        "event": {**retired.model_dump(mode="json"), "consolidation_id": consolidation_id},
    }
    db.insert_once(MEMORY_EVENTS, retired.event_id, entry, fingerprint_of(retired.model_dump()))
    count_changes(db, retired.user_id, [retired.memory_id])
