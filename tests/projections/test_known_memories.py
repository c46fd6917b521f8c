"""What a memory type's stage reads of the read model (`projections.known_memories`), on a real
MongoDB-protocol server: the read model's memories equal what `evolve` makes of the same events."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.database import Database

from events.forgetting import MemoriesForgotten
from handlers.expiry import with_expiry
from handlers.known_memory import evolve
from projections import ensure_indexes, project
from projections.extractions import project_extraction
from projections.known_memories import StageReadModel
from projections.progress import store_progress
from projections.writes import LiveWrites
from tests import factories as f

pytestmark = pytest.mark.integration
Db = Database[dict[str, Any]]


@pytest.fixture
def db(mongo: Any) -> Iterator[Db]:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    database = client[f"known_{uuid.uuid4().hex[:10]}"]
    ensure_indexes(database)
    yield database
    client.drop_database(database.name)
    client.close()


def test_the_current_memories_are_what_evolve_makes_of_the_projected_events(db: Db) -> None:
    added = f.memory_added(memory_id="m-1", embedding=(0.1234567, 0.9876543))
    other_session = f.evidence(session_id="s2", snapshot_id="snap-2")
    updated = f.memory_updated(memory_id="m-1", evidence=other_session)
    reinforced = f.memory_reinforced(memory_id="m-1", version=2)
    saved = f.memory_added(
        memory_id="m-2", evidence=f.evidence(source="sdk", snapshot_id=None, session_id=None)
    )
    elsewhere = f.memory_added(memory_id="m-3", user_id="someone-else")
    for event in (added, updated, reinforced, saved, elsewhere):
        project(db, event)
    stored = {
        m.memory_id: m for m in StageReadModel(db, "memories").current_memories("u1", "semantic")
    }
    expected = evolve({}, [added, updated, reinforced, saved])
    assert set(stored) == set(expected) == {"m-1", "m-2"}
    for memory_id, memory in expected.items():
        found = stored[memory_id]
        assert found.model_dump(exclude={"embedding"}) == memory.model_dump(exclude={"embedding"})
        assert found.embedding == pytest.approx(memory.embedding, rel=1e-6)  # stored as float32
    assert stored["m-1"].origins == ("session:s1", "session:s2")
    assert stored["m-2"].origins == ("save",)


def test_a_memory_of_another_type_or_an_erased_one_is_not_current(db: Db) -> None:
    project(db, f.memory_added(memory_id="m-1"))
    project(db, f.memory_added(memory_id="m-2", memory_type="episodic"))
    project(db, f.memory_added(memory_id="m-3"))
    forgot = MemoriesForgotten(
        event_id="forgot-1",
        occurred_at=f.at(0),
        request_id="req-1",
        scope="memory",
        user_id="u1",
        memory_type="semantic",
        memory_ids=("m-3",),
    )
    project(db, forgot)
    read_model = StageReadModel(db, "memories")
    assert [m.memory_id for m in read_model.current_memories("u1", "semantic")] == ["m-1"]
    assert read_model.forget_projected("req-1", "forgot-1")
    assert not read_model.forget_projected("req-1", "another-fact")


def test_a_snapshots_extraction_slot_names_the_result_that_holds_it(db: Db) -> None:
    snapshot = f.snapshot()
    result = f.extracted(snapshot, f.content())
    read_model = StageReadModel(db, "memories")
    assert read_model.extraction_holder(snapshot.event_id, "semantic") is None
    project_extraction(LiveWrites(db), result)
    assert read_model.extraction_holder(snapshot.event_id, "semantic") == result.event_id
    assert read_model.extraction_holder(snapshot.event_id, "episodic") is None


def test_a_snapshots_extraction_slot_gives_the_failure_of_the_result_that_holds_it(db: Db) -> None:
    failed, fine = f.snapshot(), f.snapshot()
    read_model = StageReadModel(db, "memories")
    assert read_model.extraction_failure(failed.event_id, "semantic") is None
    project_extraction(LiveWrites(db), f.extracted(failed, failure="invalid LLM output: x"))
    project_extraction(LiveWrites(db), f.extracted(fine, f.content()))
    assert read_model.extraction_failure(failed.event_id, "semantic") == "invalid LLM output: x"
    assert read_model.extraction_failure(fine.event_id, "semantic") is None


def test_due_memories_are_the_current_versions_expiring_by_then(db: Db) -> None:
    due = with_expiry([f.memory_added(memory_id="m-1")], retention=timedelta(seconds=60))
    later = with_expiry([f.memory_added(memory_id="m-2")], retention=timedelta(seconds=600))
    for event in [*due, *later, f.memory_added(memory_id="m-3")]:
        project(db, event)
    read_model = StageReadModel(db, "memories")
    assert [m.memory_id for m in read_model.due_memories("semantic", f.at(120))] == ["m-1"]


def test_the_projectors_progress_is_read_per_memories_partition(db: Db) -> None:
    store_progress(db, {("memories", 0): 41, ("memories", 2): 7, ("turns", 1): 99})
    store_progress(db, {("memories", 0): 12})  # a late writer never moves it back
    read_model = StageReadModel(db, "memories")
    assert read_model.projected_offsets([0, 1, 2]) == {0: 41, 1: None, 2: 7}
