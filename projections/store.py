"""The MongoDB read model's collections and their indexes."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.database import Database

Db = Database[dict[str, Any]]
"""The read model's database, as the projections see it."""

MEMORIES = "memories"
MEMORY_EVENTS = "memory_events"
PROFILES = "profiles"
TURNS = "turns"
SNAPSHOTS = "snapshots"
DEAD_LETTERS = "dead_letters"
SAVES = "saves"
ROLLBACKS = "rollbacks"
"""One per rollback request (`_id`: its result's event id): who asked, why, the memory and the
version restored, the restoring decision's id, or why it was refused (`projections.extractions`)."""
CONSOLIDATIONS = "consolidations"
"""One per consolidation request and memory type (`_id`: its result's event id): who asked,
why, the budget, the clusters and what became of them, the surviving and retired memories'
ids, the cost (`projections.consolidations`). Ids and counts only, never content."""
ERASURES = "erasures"
"""The receipts of forgetting, one per request (`_id`: the request's event id): who asked, why,
when, and what each stage erased — counts and ids, never content (`projections.forgetting`)."""
MEMORY_WRITES = "memory_writes"
"""Per user (`_id`: the user id): `count`, how many memory changes were projected for the user
— one per memory event, one per memory an erasure removed or unlinked — redeliveries included,
and `changed`, the memory ids of the last `CHANGES_KEPT` of them, in order — search's change
feed: its in-process index reads this by `_id` and updates only those memories
(docs/architecture.md, "Search"). Not part of the compared read model: a replay counts each
change once, the live projector once per delivery."""
CHANGES_KEPT = 1000
PROJECTOR_PROGRESS = "projector_progress"
"""Per input topic and partition (`_id`: `<topic>|<partition>`): `offset`, the last record the
projector applied (`projections.progress`). Not part of the compared read model."""

INDEXES: dict[str, list[IndexModel]] = {
    MEMORIES: [
        IndexModel([("memory_id", ASCENDING), ("version", ASCENDING)], unique=True),
        IndexModel([("user_id", ASCENDING), ("memory_type", ASCENDING), ("status", ASCENDING)]),
        IndexModel([("user_id", ASCENDING), ("subject", ASCENDING), ("status", ASCENDING)]),
        IndexModel([("evidence.snapshot_id", ASCENDING)]),
        # Analysts: the most reinforced memories; versions superseded in a period.
        IndexModel(
            [("user_id", ASCENDING), ("status", ASCENDING), ("reinforcement_count", DESCENDING)]
        ),
        IndexModel([("status", ASCENDING), ("superseded_by.at", ASCENDING)]),
        # Which memory types the read model holds (`memory_types_held`): a scan of the types.
        IndexModel([("memory_type", ASCENDING)]),
    ],
    MEMORY_EVENTS: [
        IndexModel([("memory_id", ASCENDING), ("occurred_at", ASCENDING)]),
        IndexModel([("user_id", ASCENDING), ("occurred_at", ASCENDING)]),
    ],
    TURNS: [
        IndexModel([("user_id", ASCENDING), ("session_id", ASCENDING), ("occurred_at", ASCENDING)]),
        IndexModel([("snapshot_id", ASCENDING)]),
        IndexModel([("user_id", ASCENDING), ("partition", ASCENDING)]),  # forgetting a user
        IndexModel(  # past messages: the latest turns, equal times in a fixed order
            [("user_id", ASCENDING), ("occurred_at", DESCENDING), ("_id", DESCENDING)]
        ),
    ],
    SNAPSHOTS: [
        # Not unique: `seq` restarts when an ephemeral log is lost; snapshot ids never do.
        IndexModel(
            [("user_id", ASCENDING), ("session_id", ASCENDING), ("seq", ASCENDING)],
            name="user_session_seq",
        ),
        IndexModel([("user_id", ASCENDING), ("promoted_at", DESCENDING)]),
        IndexModel([("promoted_at", ASCENDING)]),  # promotions over time
        IndexModel([("turn_ids", ASCENDING)]),
    ],
    DEAD_LETTERS: [IndexModel([("stage", ASCENDING), ("dead_lettered_at", DESCENDING)])],
    SAVES: [IndexModel([("user_id", ASCENDING), ("at", DESCENDING)])],
    ROLLBACKS: [IndexModel([("user_id", ASCENDING), ("memory_id", ASCENDING), ("at", ASCENDING)])],
    CONSOLIDATIONS: [
        IndexModel([("user_id", ASCENDING), ("consolidation_id", ASCENDING)]),
        IndexModel([("user_id", ASCENDING), ("memory_ids", ASCENDING)]),
    ],
    ERASURES: [IndexModel([("user_id", ASCENDING), ("requested_at", ASCENDING)])],
}


RETIRED_INDEXES: dict[str, list[str]] = {
    SNAPSHOTS: ["user_id_1_session_id_1_seq_1"],  # unique in 0.1: clashed after a lost log
    TURNS: ["user_id_1_occurred_at_-1"],  # past messages before their order had a tie-break
}


def ensure_indexes(db: Db) -> None:
    """Create the read model's indexes and drop retired ones (idempotent)."""
    for collection, names in RETIRED_INDEXES.items():
        existing = db[collection].index_information()
        for name in names:
            if name in existing:
                db[collection].drop_index(name)
    for collection, indexes in INDEXES.items():
        db[collection].create_indexes(indexes)


def memory_types_held(db: Db, besides: Collection[str]) -> list[str]:
    """The memory types the read model holds memories of, other than `besides` (a distinct scan
    of the `memory_type` index: as many steps as types, not as memories)."""
    found = db[MEMORIES].distinct("memory_type", {"memory_type": {"$nin": list(besides)}})
    return sorted(str(name) for name in found)
