"""Replaying from the collections refuses a read model the projector has not caught up on; verify
compares a memory's vector by its float32s, whichever form it was stored in."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from pymongo import MongoClient

from memstream.cli.replay import IncompleteReadModel, collection_events, differences
from projections.vectors import pack_vector

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


def test_verify_sees_a_vector_stored_as_doubles_and_packed_as_the_same_and_another_as_different(
    mongo: Any,
) -> None:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    old, new = (client[f"test_{uuid.uuid4().hex[:12]}"] for _ in range(2))
    try:
        old["memories"].insert_many(
            [
                {"_id": "same:v1", "embedding": [0.1234567, -0.5], "text": "a"},
                {"_id": "other:v1", "embedding": [0.1234567, -0.5], "text": "b"},
                {"_id": "none:v1", "embedding": [], "text": "c"},
            ]
        )
        new["memories"].insert_many(
            [
                {"_id": "same:v1", "embedding": pack_vector([0.1234567, -0.5]), "text": "a"},
                {"_id": "other:v1", "embedding": pack_vector([0.1234568, -0.5]), "text": "b"},
                {"_id": "none:v1", "embedding": pack_vector([]), "text": "c"},
            ]
        )
        assert differences(old, new) == ["memories 'other:v1': embedding differs"]
    finally:
        for database in (old, new):
            client.drop_database(database.name)
        client.close()
