"""Replaying from the collections refuses a read model the projector has not caught up on."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from pymongo import MongoClient

from memstream.replay import IncompleteReadModel, collection_events

pytestmark = pytest.mark.integration


def test_a_snapshot_whose_turn_is_not_projected_yet_is_an_incomplete_read_model(
    mongo: Any,
) -> None:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    source = client[f"test_{uuid.uuid4().hex[:12]}"]
    try:
        source["snapshots"].insert_one(
            {
                "_id": "snapshot-1",
                "user_id": "tim",
                "session_id": "s1",
                "agent_id": None,
                "seq": 1,
                "reason": "flush",
                "promoted_at": datetime(2026, 11, 30, tzinfo=UTC),
                "turn_ids": ["turn-not-projected"],
            }
        )
        with pytest.raises(IncompleteReadModel, match="turn-not-projected"):
            list(collection_events(source))
    finally:
        client.drop_database(source.name)
        client.close()
