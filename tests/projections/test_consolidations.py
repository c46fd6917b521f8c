"""Projecting consolidations: the survivor's version like any update, the retired memory out of
the current ones but in history, the run's document, idempotent redelivery, erasure, and a
replay from the collections that rebuilds the same read model."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.database import Database

from events.consolidations import MemoriesConsolidated
from events.memories import LLMUsage
from handlers.consolidation import ClusterAnswer, Verdict, clusters_of, consolidation_record
from handlers.extraction.results import save_record
from handlers.forgetting import memories_forgotten
from memstream.sdk.read_model import ReadModel
from memstream.sdk.results import Memory
from projections import ensure_indexes, project
from projections.known_memories import StageReadModel
from tests import factories as f

pytestmark = pytest.mark.integration
Db = Database[dict[str, Any]]
REX = f.memory_added(memory_id="m-1", content=f.content(text="The user has a dog named Rex."))
REX_AGAIN = f.memory_added(
    memory_id="m-2", content=f.content(text="The user owns a dog, Rex."), occurred_at=f.at(60)
)
MERGED = "The user has a dog named Rex."


@pytest.fixture
def db(mongo: Any) -> Iterator[Db]:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    database = client[f"consolidation_{uuid.uuid4().hex[:10]}"]
    ensure_indexes(database)
    _saved(database)
    yield database
    client.drop_database(database.name)
    client.close()


def _saved(db: Db) -> None:
    for at, decision in ((0, REX), (60, REX_AGAIN)):
        project(db, save_record(f.save_request(occurred_at=f.at(at)), [decision], LLMUsage()))


def decided(db: Db, action: str = "merge", **request: Any) -> MemoriesConsolidated:
    """The stage's record for a consolidation request, decided on what `db` holds."""
    reads = StageReadModel(db, "memories")
    consolidation = f.consolidation_request(occurred_at=f.at(120), **request)
    known = reads.current_memories(consolidation.user_id, "semantic")
    clusters = clusters_of(known, user_id=consolidation.user_id, threshold=0.9)
    verdict = Verdict(action, survivor=0, text=MERGED, reason="same dog")  # type: ignore[arg-type]
    return consolidation_record(
        consolidation,
        "semantic",
        [ClusterAnswer(cluster, verdict, asked=True) for cluster in clusters],
        vectors={0: (0.6, 0.8)},
        provenance=f.provenance(),
        usage=LLMUsage(calls=1, prompt_tokens=200, completion_tokens=30),
        prompt_version="consolidate-1",
    )


def read(mongo: Any, db: Db, **options: Any) -> list[Memory]:
    async def run() -> list[Memory]:
        model = ReadModel(mongo.uri, db.name)
        try:
            return await model.memories(f.USER_ID, **options)
        finally:
            await model.close()

    return asyncio.run(run())


def test_a_merge_keeps_one_current_memory_and_the_retired_one_in_history(
    mongo: Any, db: Db
) -> None:
    result = decided(db)
    assert [r.memory_id for r in result.retired] == ["m-2"]
    project(db, result)
    current = read(mongo, db)
    assert [(m["memory_id"], m["version"], m["text"]) for m in current] == [("m-1", 2, MERGED)]
    retired = db["memories"].find_one({"_id": "m-2:v1"})
    assert retired is not None and retired["status"] == "retired"
    assert retired["retired_into"]["memory_id"] == "m-1"
    assert retired["retired_into"]["version"] == 2
    assert retired["retired_into"]["consolidation_id"] == result.consolidation_id
    logged = db["memory_events"].find_one({"memory_id": "m-2", "event_type": "MemoryRetired"})
    assert logged is not None and logged["event"]["into"] == "m-1"
    run = db["consolidations"].find_one({"_id": result.event_id})
    assert run is not None
    assert (run["clusters_found"], run["clusters_asked"], run["usage"]["calls"]) == (1, 1, 1)
    assert run["memory_ids"] == ["m-1", "m-2"]
    reads = StageReadModel(db, "memories")
    assert reads.consolidation_projected(result.event_id)
    assert [m.memory_id for m in reads.current_memories(f.USER_ID, "semantic")] == ["m-1"]
    with_retired = reads.memory_facts(f.USER_ID, "semantic", retired=True)
    assert sorted(m.memory_id for m in with_retired) == ["m-1", "m-2"]
    # As of before the consolidation both were current; after it, the merged one alone.
    before = read(mongo, db, as_of=f.at(90))
    assert sorted((m["memory_id"], m["version"]) for m in before) == [("m-1", 1), ("m-2", 1)]
    after = read(mongo, db, as_of=f.at(150))
    assert [(m["memory_id"], m["version"]) for m in after] == [("m-1", 2)]


def test_a_redelivered_consolidation_changes_nothing(db: Db) -> None:
    result = decided(db, action="supersede")
    project(db, result)
    names = ("memories", "memory_events", "consolidations")
    before = {name: list(db[name].find()) for name in names}
    project(db, result)
    assert {name: list(db[name].find()) for name in names} == before


def test_forgetting_a_retired_memory_or_the_user_erases_it_and_the_runs(db: Db) -> None:
    project(db, decided(db))
    fact = memories_forgotten(f.memory_forgotten(memory_id="m-2"), "semantic", ["m-2"])
    project(db, fact)
    assert db["memories"].count_documents({"memory_id": "m-2"}) == 0
    assert db["memory_events"].count_documents({"memory_id": "m-2"}) == 0
    assert db["consolidations"].count_documents({}) == 0
    assert db["memories"].count_documents({"memory_id": "m-1"}) == 2


def test_a_read_model_with_consolidations_is_rebuilt_from_its_collections(mongo: Any) -> None:
    from memstream.cli.replay import collection_events, differences, replay

    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    source, target = (client[f"consolidation_{uuid.uuid4().hex[:10]}"] for _ in range(2))
    try:
        ensure_indexes(source)
        _saved(source)
        project(source, decided(source))
        report = replay(collection_events(source), target, show=False)
        assert report.collisions == []
        assert target["consolidations"].count_documents({}) == 1
        assert differences(source, target) == []
    finally:
        client.drop_database(source.name)
        client.drop_database(target.name)
        client.close()
