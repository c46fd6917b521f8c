"""Projecting result records: the first result per snapshot (or save) and type, expanded.

A `SnapshotExtracted` record carries every decision one memory type made about one snapshot.
The projector first *claims* the snapshot's `extractions.<type>` slot for the record (by its
fingerprint); only the record that holds the claim is expanded into `memories`,
`memory_events` and `profiles`. A redelivery of that record holds the claim too and re-applies
its decisions idempotently (repairing a crash half-way through the expansion); any other record
for the same snapshot and type — a re-extraction by a worker that crashed after writing its
first result — is passed over, so the read model never mixes two answers. The one exception: the
result of an operator's redrive (`redrive_id` set) replaces a *failed* result, which has no
decisions to mix with. A direct save's
`MemorySaved` claims its document in `saves` the same way, and a rollback's `MemoryRolledBack`
its document in `rollbacks` (who asked, why, what it restored or why it refused).
"""

from __future__ import annotations

import logging

from events.rollbacks import MemoryRolledBack
from events.saves import MemorySaved
from events.snapshots import SnapshotExtracted
from projections.memories import project_memory_event
from projections.store import ROLLBACKS, SAVES, SNAPSHOTS
from projections.write_once import fingerprint_of
from projections.writes import Writes

log = logging.getLogger(__name__)


def project_extraction(db: Writes, result: SnapshotExtracted) -> bool:
    """Apply `result` if it is the first for its snapshot and type; True if it was applied."""
    record = {
        "event_id": result.event_id,
        "memory_ids": list(result.memory_ids),
        "decision_ids": [decision.event_id for decision in result.decisions],
        "decisions": len(result.decisions),
        "actions": [decision.event_type for decision in result.decisions],
        "attempts": result.attempts,
        "failure": result.failure,
        "usage": result.usage.model_dump(),
        "at": result.occurred_at,
        "redrive_id": result.redrive_id,
    }
    slot = f"extractions.{result.memory_type}"
    # An operator's redrive may replace a failed result (docs/architecture.md, "Dead letters").
    take = db.replace_failed if result.redrive_id else db.claim
    # Projected before its snapshot, the record starts the document: it names its user and
    # session so that forgetting the session finds it (`projections.forgetting`).
    owner = {"user_id": result.user_id, "session_id": result.session_id}
    if not take(
        SNAPSHOTS, result.snapshot_id, slot, record, result_fingerprint(result), created=owner
    ):
        log.warning(
            "ignored a later %s result for snapshot %s: the first one stands",
            result.memory_type,
            result.snapshot_id,
        )
        return False
    for decision in result.decisions:
        project_memory_event(db, decision)
    return True


def project_save(db: Writes, result: MemorySaved) -> bool:
    """Apply a direct save's decisions if its record is the first for the save; True if so."""
    record = {
        "save_id": result.save_id,
        "user_id": result.user_id,
        "agent_id": result.agent_id,
        "memory_type": result.memory_type,
        "memory_ids": list(result.memory_ids),
        "decision_ids": [decision.event_id for decision in result.decisions],
        "actions": [decision.event_type for decision in result.decisions],
        "usage": result.usage.model_dump(),
        "at": result.occurred_at,
    }
    if not db.claim(SAVES, result.event_id, "", record, result_fingerprint(result)):
        log.warning("ignored a later result for save %s: the first one stands", result.save_id)
        return False
    for decision in result.decisions:
        project_memory_event(db, decision)
    return True


def project_rollback(db: Writes, result: MemoryRolledBack) -> bool:
    """Apply a rollback's restoring version if its record is the first for the request; True
    if so. A refused rollback leaves its document (the caller reads why) and nothing else."""
    record = {
        "rollback_id": result.rollback_id,
        "user_id": result.user_id,
        "memory_type": result.memory_type,
        "memory_id": result.memory_id,
        "memory_ids": [result.memory_id],
        "to_version": result.to_version,
        "requested_by": result.requested_by,
        "reason": result.reason,
        "refused": result.refused,
        "decision_ids": [decision.event_id for decision in result.decisions],
        "versions": [decision.version for decision in result.decisions],
        "at": result.occurred_at,
    }
    if not db.claim(ROLLBACKS, result.event_id, "", record, result_fingerprint(result)):
        log.warning("ignored a later result for rollback %s", result.rollback_id)
        return False
    for decision in result.decisions:
        project_memory_event(db, decision)
    return True


def result_fingerprint(result: SnapshotExtracted | MemorySaved | MemoryRolledBack) -> str:
    """What a result record's claim holds: the fingerprint of its content."""
    # Without a redrive the fingerprint is the one records written before redrives had.
    unset = {"redrive_id"} if getattr(result, "redrive_id", None) is None else set()
    return fingerprint_of(result.model_dump(exclude=unset))
