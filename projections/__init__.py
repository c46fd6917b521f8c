"""MongoDB read models, projected idempotently from the event log."""

from __future__ import annotations

from typing import Any

from pymongo.database import Database

from events.codec import AnyEvent
from projections.apply import apply_event
from projections.batch import BatchOutcome, project_batch
from projections.store import ensure_indexes
from projections.write_once import IdCollision
from projections.writes import LiveWrites, Writes


def project(db: Database[dict[str, Any]], event: AnyEvent, *, partition: int | None = None) -> None:
    """Apply any event to the read model now; events without a view (commands) are skipped.

    `partition` is the partition the record was read from (None when unknown). Raises
    `IdCollision` when an id the event uses already holds other content.
    """
    apply_event(LiveWrites(db), event, partition=partition)


__all__ = [
    "BatchOutcome",
    "IdCollision",
    "LiveWrites",
    "Writes",
    "apply_event",
    "ensure_indexes",
    "project",
    "project_batch",
]
