"""The memories a stage reconciles against: the read model's, with the stage's own decisions the
projector has not applied yet laid over them (docs/architecture.md, "Reconciliation").

Read-your-writes: two snapshots of one user arriving back to back must not both ADD the same
fact, even when MongoDB has not projected the first one's decisions. So a memory type's stage
reads the user's current memories from the read model and applies to them, in log order, every
record it wrote that the read model may not hold yet: its results (their decisions, through
`handlers.known_memory.evolve`), its forget facts (the memories they name leave) and its
consolidations (their decisions, then the memories they retired leave).

Applying a record the read model already holds changes nothing, which is what makes the read
model's lag harmless: `evolve` adds a memory only if it is not known, replaces it only with a
later version, merges attributes only into the version they name (the same merge twice is the
same), and a forgotten memory is gone either way. Records are applied in the order the stage
wrote them, so a memory forgotten after an update is forgotten, and one added after a forget
(the fact said again later, under a new id) stays.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from events.consolidations import MemoriesConsolidated
from events.forgetting import MemoriesForgotten
from events.memories import MemoryType
from handlers.inputs import ResultRecord
from handlers.known_memory import KnownMemory, evolve

OwnRecord = ResultRecord | MemoriesForgotten
"""What a memory type's stage writes to the memories topic."""


def is_own(record: object, memory_type: MemoryType) -> bool:
    """Whether a memories-topic event was written by the stage of `memory_type`."""
    return isinstance(record, ResultRecord | MemoriesForgotten) and (
        record.memory_type == memory_type
    )


def with_own_records(
    known: Mapping[str, KnownMemory], records: Iterable[OwnRecord]
) -> dict[str, KnownMemory]:
    """`known` (the read model's current memories, by id) after the stage's own `records`."""
    state = dict(known)
    for record in records:
        if isinstance(record, MemoriesForgotten):
            for memory_id in record.memory_ids:
                state.pop(memory_id, None)
        else:
            state = evolve(state, record.decisions)
            if isinstance(record, MemoriesConsolidated):  # retired: current no more
                for retired in record.retired:
                    state.pop(retired.memory_id, None)
    return state
