"""When `ReadModel.search` rebuilds a user's index: when the user's write count changes (one
lookup by id), or, in a database without write counts, when the user's memory events do."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.database import Database

from memstream.read_model import ReadModel
from projections import ensure_indexes

NOW = datetime(2026, 11, 30, tzinfo=UTC)


@pytest.fixture
def database(mongo: Any) -> Iterator[tuple[str, Database[dict[str, Any]]]]:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    db = client[f"fresh_{uuid.uuid4().hex[:10]}"]
    ensure_indexes(db)
    yield mongo.uri, db
    client.drop_database(db.name)
    client.close()


def add(db: Database[dict[str, Any]], memory_id: str, text: str, vector: list[float]) -> None:
    db["memories"].insert_one(
        {
            "_id": f"{memory_id}:v1",
            "memory_id": memory_id,
            "version": 1,
            "status": "current",
            "memory_type": "semantic",
            "user_id": "ana",
            "subject": "the user",
            "owner": "user",
            "text": text,
            "embedding": vector,
            "embedding_model": "m",
            "created_at": NOW,
            "updated_at": NOW,
        }
    )


def test_search_reuses_its_index_until_the_users_write_count_changes(
    database: tuple[str, Database[dict[str, Any]]],
) -> None:
    uri, db = database
    add(db, "tea", "The user drinks tea.", [1.0, 0.0])
    db["memory_writes"].insert_one({"_id": "ana", "count": 1})

    async def three_searches() -> list[list[str]]:
        read_model = ReadModel(uri, db.name)
        try:
            ids = []
            for step in range(3):
                if step == 1:  # a memory appears, its write not counted yet: the index is reused
                    add(db, "jazz", "The user likes jazz.", [0.0, 1.0])
                if step == 2:
                    db["memory_writes"].update_one({"_id": "ana"}, {"$inc": {"count": 1}})
                hits = await read_model.search("ana", "jazz", [1.0, 0.0], "m")
                ids.append(sorted(d["memory_id"] for d in hits))
            return ids
        finally:
            await read_model.close()

    assert asyncio.run(three_searches()) == [["tea"], ["tea"], ["jazz", "tea"]]


def test_without_a_write_count_search_follows_the_users_memory_events(
    database: tuple[str, Database[dict[str, Any]]],
) -> None:
    uri, db = database
    add(db, "tea", "The user drinks tea.", [1.0, 0.0])
    db["memory_events"].insert_one({"_id": "e1", "user_id": "ana", "occurred_at": NOW})

    async def two_searches() -> list[list[str]]:
        read_model = ReadModel(uri, db.name)
        try:
            ids = []
            for step in range(2):
                if step == 1:
                    add(db, "jazz", "The user likes jazz.", [0.0, 1.0])
                    db["memory_events"].insert_one(
                        {"_id": "e2", "user_id": "ana", "occurred_at": NOW}
                    )
                hits = await read_model.search("ana", "jazz", [1.0, 0.0], "m")
                ids.append(sorted(d["memory_id"] for d in hits))
            return ids
        finally:
            await read_model.close()

    assert asyncio.run(two_searches()) == [["tea"], ["jazz", "tea"]]
