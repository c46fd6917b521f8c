"""The projector's progress in the read model: per topic partition, never moved back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.database import Database

from projections.progress import projected_offsets, store_progress, topic_offsets

pytestmark = pytest.mark.integration
Db = Database[dict[str, Any]]


@pytest.fixture
def db(mongo: Any) -> Iterator[Db]:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    database = client[f"progress_{uuid.uuid4().hex[:10]}"]
    yield database
    client.drop_database(database.name)
    client.close()


def test_progress_is_read_per_topic_and_a_late_writer_never_moves_it_back(db: Db) -> None:
    store_progress(db, {("turns", 0): 10, ("turns", 3): 4, ("snapshots", 0): 7})
    store_progress(db, {("turns", 0): 8, ("turns", 3): 5})  # a late writer, then a new batch
    assert topic_offsets(db, "turns") == {0: 10, 3: 5}
    assert topic_offsets(db, "snapshots") == {0: 7}
    assert topic_offsets(db, "memories") == {}
    assert projected_offsets(db, "turns", [0, 1]) == {0: 10, 1: None}
