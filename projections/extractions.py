"""Projecting result records: the first result per snapshot (or save) and type, expanded.

A `SnapshotExtracted` record carries every decision one memory type made about one snapshot.
The projector first *claims* the snapshot's `extractions.<type>` slot for the record (by its
fingerprint); only the record that holds the claim is expanded into `memories`,
`memory_events` and `profiles`. A redelivery of that record holds the claim too and re-applies
its decisions idempotently (repairing a crash half-way through the expansion); any other record
for the same snapshot and type — a re-extraction by a worker that crashed after writing its
first result — is passed over, so the read model never mixes two answers. A direct save's
`MemorySaved` claims its document in `saves` the same way.
"""

from __future__ import annotations

import logging

from pymongo.errors import DuplicateKeyError

from events.saves import MemorySaved
from events.snapshots import SnapshotExtracted
from projections.identity import FINGERPRINT, fingerprint_of
from projections.memories import project_memory_event
from projections.store import SAVES, SNAPSHOTS, Db

log = logging.getLogger(__name__)


def project_extraction(db: Db, result: SnapshotExtracted) -> bool:
    """Apply `result` if it is the first for its snapshot and type; True if it was applied."""
    if not _claim(db, result):
        log.warning(
            "ignored a later %s result for snapshot %s: the first one stands",
            result.memory_type,
            result.snapshot_id,
        )
        return False
    for decision in result.decisions:
        project_memory_event(db, decision)
    return True


def project_save(db: Db, result: MemorySaved) -> bool:
    """Apply a direct save's decisions if its record is the first for the save; True if so."""
    fingerprint = fingerprint_of(result.model_dump(mode="json"))
    document = {
        "save_id": result.save_id,
        "user_id": result.user_id,
        "agent_id": result.agent_id,
        "memory_type": result.memory_type,
        "memory_ids": list(result.memory_ids),
        "actions": [decision.event_type for decision in result.decisions],
        "usage": result.usage.model_dump(),
        "at": result.occurred_at,
        FINGERPRINT: fingerprint,
    }
    outcome = db[SAVES].update_one(
        {"_id": result.event_id}, {"$setOnInsert": document}, upsert=True
    )
    if outcome.upserted_id is None:
        stored = db[SAVES].find_one({"_id": result.event_id}, {FINGERPRINT: 1}) or {}
        if stored.get(FINGERPRINT, fingerprint) != fingerprint:
            log.warning("ignored a later result for save %s: the first one stands", result.save_id)
            return False
    for decision in result.decisions:
        project_memory_event(db, decision)
    return True


def _claim(db: Db, result: SnapshotExtracted) -> bool:
    """Record the extraction on its snapshot unless another record claimed it first."""
    fingerprint = fingerprint_of(result.model_dump(mode="json"))
    slot = f"extractions.{result.memory_type}"
    record = {
        "event_id": result.event_id,
        "memory_ids": list(result.memory_ids),
        "decisions": len(result.decisions),
        "actions": [decision.event_type for decision in result.decisions],
        "attempts": result.attempts,
        "failure": result.failure,
        "usage": result.usage.model_dump(),
        "at": result.occurred_at,
        FINGERPRINT: fingerprint,
    }
    try:
        db[SNAPSHOTS].update_one(
            {"_id": result.snapshot_id, slot: {"$exists": False}},
            {"$set": {slot: record}},
            upsert=True,
        )
        return True
    except DuplicateKeyError:  # the slot is taken: by this record (a redelivery) or another
        snapshot = db[SNAPSHOTS].find_one({"_id": result.snapshot_id}, {slot: 1}) or {}
        claimed = snapshot.get("extractions", {}).get(result.memory_type, {})
        return bool(claimed.get(FINGERPRINT, fingerprint) == fingerprint)
