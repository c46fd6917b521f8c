"""Which projection applies an event: one dispatch, shared by every executor of `Writes`."""

from __future__ import annotations

from events.codec import AnyEvent
from events.consolidations import MemoriesConsolidated
from events.dead_letters import DeadLetterRedriven, InputDeadLettered
from events.forgetting import (
    MemoriesForgotten,
    MemoryExpired,
    MemoryForgotten,
    SessionForgotten,
    SessionsForgotten,
    UserForgotten,
)
from events.memories import MemoryAdded, MemoryReinforced, MemoryUpdated
from events.rollbacks import MemoryRolledBack
from events.saves import MemorySaved
from events.snapshots import SnapshotExtracted, SnapshotPromoted
from events.turns import TurnRecorded
from projections.consolidations import project_consolidation
from projections.extractions import project_extraction, project_rollback, project_save
from projections.forgetting import project_forgetting
from projections.memories import project_memory_event
from projections.short_term import (
    project_dead_letter,
    project_redrive,
    project_snapshot,
    project_turn,
)
from projections.writes import Writes


def apply_event(db: Writes, event: AnyEvent, *, partition: int | None = None) -> None:
    """Say, through `db`, what `event` changes in the read model (live or in bulk); a turn
    keeps the turns-topic `partition` it was read from (`projections.forgetting`)."""
    if isinstance(event, TurnRecorded):
        project_turn(db, event, partition)
    elif isinstance(event, SnapshotPromoted):
        project_snapshot(db, event)
    elif isinstance(event, SnapshotExtracted):
        project_extraction(db, event)
    elif isinstance(event, MemorySaved):
        project_save(db, event)
    elif isinstance(event, MemoryRolledBack):
        project_rollback(db, event)
    elif isinstance(event, MemoriesConsolidated):
        project_consolidation(db, event)
    elif isinstance(event, MemoryAdded | MemoryUpdated | MemoryReinforced):
        project_memory_event(db, event)  # a memory event recorded on its own (releases ≤ 0.1)
    elif isinstance(event, InputDeadLettered):
        project_dead_letter(db, event)
    elif isinstance(event, DeadLetterRedriven):
        project_redrive(db, event)
    elif isinstance(
        event,
        MemoryForgotten
        | SessionForgotten
        | UserForgotten
        | SessionsForgotten
        | MemoriesForgotten
        | MemoryExpired,
    ):
        project_forgetting(db, event)
