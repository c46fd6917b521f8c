"""When and how `ReadModel.search` refreshes a user's index: when the user's write count changes
(one lookup by id) it updates the memories the change feed names, or rebuilds when the feed no
longer holds them all; in a database without write counts, it follows the user's memory events."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.database import Database

from memstream.sdk.read_model import ReadModel
from memstream.sdk.search_index import UserIndex
from projections import ensure_indexes
from projections.memories import project_memory_event
from projections.writes import LiveWrites
from tests import factories

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


def test_after_projected_changes_search_updates_its_index_and_ranks_as_a_fresh_read_model(
    database: tuple[str, Database[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, db = database
    writes = LiveWrites(db)
    first = [
        factories.memory_added(memory_id=f"m{i}", content=factories.content(text=text))
        for i, text in enumerate(
            ["The user works at Stripe.", "The user drinks tea.", "The user lives in Porto."]
        )
    ]
    later = [
        factories.memory_updated(memory_id="m0"),  # works at Google now
        factories.memory_reinforced(memory_id="m1"),
        factories.memory_added(
            memory_id="m3", content=factories.content(text="The user works on weekends.")
        ),
        first[2],  # a redelivery
    ]
    updates: list[int] = []
    update = UserIndex.updated

    def counted(self: UserIndex, *args: Any) -> UserIndex:
        updates.append(len(args[1]))
        return update(self, *args)

    monkeypatch.setattr(UserIndex, "updated", counted)

    async def searches() -> tuple[list[list[Any]], list[list[Any]]]:
        read_model, fresh = ReadModel(uri, db.name), ReadModel(uri, db.name)
        try:
            for event in first:
                project_memory_event(writes, event)
            await read_model.search("u1", "works", [0.6, 0.8], "scripted-embedding")
            for event in later:
                project_memory_event(writes, event)
            ours, theirs = [], []
            for mode in ("vector", "keyword", "hybrid"):
                for side, found in ((read_model, ours), (fresh, theirs)):
                    hits = await side.search(
                        "u1", "works", [0.6, 0.8], "scripted-embedding", mode=mode
                    )
                    found.append([(d["_id"], d["score"], d["reinforcement_count"]) for d in hits])
            return ours, theirs
        finally:
            await read_model.close()
            await fresh.close()

    ours, theirs = asyncio.run(searches())
    assert ours == theirs
    assert sorted(i for i, _, _ in ours[2]) == ["m0:v2", "m1:v1", "m2:v1", "m3:v1"]
    assert dict((i, n) for i, _, n in ours[2])["m1:v1"] == 1
    assert updates == [4]  # one update with the four changed memories' current versions


def test_more_changes_than_the_feed_keeps_rebuild_the_index(
    database: tuple[str, Database[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, db = database
    monkeypatch.setattr("projections.memories.CHANGES_KEPT", 2)
    writes = LiveWrites(db)

    async def searches() -> list[list[str]]:
        read_model = ReadModel(uri, db.name)
        try:
            found = []
            for batch in (range(2), range(2, 5)):
                for i in batch:
                    project_memory_event(writes, factories.memory_added(memory_id=f"m{i}"))
                hits = await read_model.search("u1", "Stripe", [0.6, 0.8], "scripted-embedding")
                found.append(sorted(d["memory_id"] for d in hits))
            return found
        finally:
            await read_model.close()

    assert asyncio.run(searches()) == [["m0", "m1"], ["m0", "m1", "m2", "m3", "m4"]]
