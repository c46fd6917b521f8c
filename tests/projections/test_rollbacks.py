"""Projecting rollbacks: the restoring version like any update, the request's document, history
with who and why, idempotent replay, a refusal that changes no memory, and erasure."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.database import Database

from events.rollbacks import MemoryRolledBack
from handlers.forgetting import memories_forgotten
from handlers.rollback import rollback_decision, rollback_record
from memstream.sdk.read_model import ReadModel
from memstream.sdk.results import MemoryVersion
from projections import ensure_indexes, project
from projections.known_memories import StageReadModel
from tests import factories as f

pytestmark = pytest.mark.integration
Db = Database[dict[str, Any]]
FIRST = f.memory_added(memory_id="m-1")
SECOND = f.memory_updated(memory_id="m-1")


@pytest.fixture
def db(mongo: Any) -> Iterator[Db]:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    database = client[f"rollback_{uuid.uuid4().hex[:10]}"]
    ensure_indexes(database)
    project(database, FIRST)
    project(database, SECOND)
    yield database
    client.drop_database(database.name)
    client.close()


def decided(db: Db, **request: Any) -> MemoryRolledBack:
    """The stage's record for a rollback request, decided on what `db` holds."""
    reads = StageReadModel(db, "memories")
    rollback = f.rollback_request(**request)
    current = {m.memory_id: m for m in reads.current_memories(rollback.user_id, "semantic")}
    versions = reads.memory_versions(rollback.memory_id)
    answer = rollback_decision(rollback, current.get(rollback.memory_id), versions, f.provenance())
    return rollback_record(rollback, answer)


def history(mongo: Any, db: Db) -> list[MemoryVersion]:
    async def read() -> list[MemoryVersion]:
        model = ReadModel(mongo.uri, db.name)
        try:
            return await model.history(f.USER_ID, "m-1")
        finally:
            await model.close()

    return asyncio.run(read())


def test_the_port_reads_every_stored_version(db: Db) -> None:
    versions = StageReadModel(db, "memories").memory_versions("m-1")
    assert [(v.version, v.content.text) for v in versions] == [
        (1, FIRST.content.text),
        (2, SECOND.content.text),
    ]
    assert versions[0].embedding == pytest.approx(FIRST.embedding)
    assert versions[0].embedding_model == "scripted-embedding"


def test_a_rollback_makes_the_next_version_with_the_old_text(mongo: Any, db: Db) -> None:
    result = decided(db, to_version=1)
    project(db, result)
    current = db["memories"].find_one({"memory_id": "m-1", "status": "current"})
    assert current is not None
    assert (current["version"], current["text"]) == (3, FIRST.content.text)
    second = db["memories"].find_one({"_id": "m-1:v2"})
    assert second is not None and second["status"] == "superseded"
    assert second["superseded_by"]["reason"].startswith("rollback to version 1 requested by")
    assert StageReadModel(db, "memories").rollback_projected(result.event_id)

    versions = history(mongo, db)
    assert [v["version"] for v in versions] == [1, 2, 3]
    assert [v["rolled_back_by"] is None for v in versions] == [True, True, False]
    rollback = versions[2]["rolled_back_by"]
    assert rollback is not None
    assert rollback["requested_by"] == "cli:alice"
    assert rollback["reason"] == "the update was wrong"
    assert (rollback["to_version"], rollback["refused"]) == (1, None)
    created_by = versions[2]["created_by"]
    assert created_by is not None and created_by["event_type"] == "MemoryUpdated"


def test_a_redelivered_rollback_changes_nothing(db: Db) -> None:
    result = decided(db, to_version=1)
    project(db, result)
    before = {name: list(db[name].find()) for name in ("memories", "memory_events", "rollbacks")}
    project(db, result)
    after = {name: list(db[name].find()) for name in ("memories", "memory_events", "rollbacks")}
    assert after == before


def test_a_refused_rollback_is_recorded_and_changes_no_memory(db: Db) -> None:
    result = decided(db, to_version=5)
    assert result.refused and not result.decisions
    project(db, result)
    assert db["memories"].count_documents({"memory_id": "m-1"}) == 2
    stored = db["rollbacks"].find_one({"_id": result.event_id})
    assert stored is not None
    assert "has no version 5" in stored["refused"]
    assert stored["decision_ids"] == []


def test_forgetting_the_memory_erases_its_rollbacks(db: Db) -> None:
    project(db, decided(db, to_version=1))
    project(db, decided(db, to_version=7))
    fact = memories_forgotten(f.memory_forgotten(memory_id="m-1"), "semantic", ["m-1"])
    project(db, fact)
    assert db["rollbacks"].count_documents({}) == 0
    assert db["memories"].count_documents({"memory_id": "m-1"}) == 0


def test_a_read_model_with_rollbacks_is_rebuilt_from_its_collections(mongo: Any) -> None:
    """Replay from the collections rebuilds the rollbacks: the saves that made versions 1 and 2
    (a minute apart), then a restore and a refusal."""
    from events.memories import LLMUsage
    from handlers.extraction.results import save_record
    from memstream.cli.replay import collection_events, differences, replay

    first = f.memory_added(memory_id="m-1")
    second = f.memory_updated(memory_id="m-1", occurred_at=f.at(60))
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    source, target = (client[f"rollback_{uuid.uuid4().hex[:10]}"] for _ in range(2))
    try:
        ensure_indexes(source)
        for at, decision in ((0, first), (60, second)):
            request = f.save_request(occurred_at=f.at(at))
            project(source, save_record(request, [decision], LLMUsage()))
        project(source, decided(source, to_version=1, occurred_at=f.at(120)))
        project(source, decided(source, to_version=8, occurred_at=f.at(180)))
        report = replay(collection_events(source), target, show=False)
        assert report.collisions == []
        assert target["rollbacks"].count_documents({}) == 2
        assert differences(source, target) == []
    finally:
        client.drop_database(source.name)
        client.drop_database(target.name)
        client.close()
