"""The MongoDB read model's collections and their indexes."""

from __future__ import annotations

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

INDEXES: dict[str, list[IndexModel]] = {
    MEMORIES: [
        IndexModel([("memory_id", ASCENDING), ("version", ASCENDING)], unique=True),
        IndexModel([("user_id", ASCENDING), ("memory_type", ASCENDING), ("status", ASCENDING)]),
        IndexModel([("user_id", ASCENDING), ("subject", ASCENDING), ("status", ASCENDING)]),
        IndexModel([("evidence.snapshot_id", ASCENDING)]),
    ],
    MEMORY_EVENTS: [
        IndexModel([("memory_id", ASCENDING), ("occurred_at", ASCENDING)]),
        IndexModel([("user_id", ASCENDING), ("occurred_at", ASCENDING)]),
    ],
    TURNS: [
        IndexModel([("user_id", ASCENDING), ("session_id", ASCENDING), ("occurred_at", ASCENDING)]),
        IndexModel([("snapshot_id", ASCENDING)]),
    ],
    SNAPSHOTS: [
        IndexModel(
            [("user_id", ASCENDING), ("session_id", ASCENDING), ("seq", ASCENDING)], unique=True
        ),
        IndexModel([("user_id", ASCENDING), ("promoted_at", DESCENDING)]),
        IndexModel([("turn_ids", ASCENDING)]),
    ],
    DEAD_LETTERS: [IndexModel([("stage", ASCENDING), ("dead_lettered_at", DESCENDING)])],
}


def ensure_indexes(db: Db) -> None:
    """Create the read model's indexes (idempotent)."""
    for collection, indexes in INDEXES.items():
        db[collection].create_indexes(indexes)
