"""Projections on a real MongoDB-protocol server: idempotent, rebuildable, first result wins,
collisions refused, current-user profile."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson.binary import VECTOR_SUBTYPE, Binary
from pymongo import MongoClient
from pymongo.database import Database

from events import (
    Evidence,
    MemoryAdded,
    MemoryContent,
    MemoryReinforced,
    MemoryUpdated,
    Provenance,
    SnapshotExtracted,
    SnapshotPromoted,
    SnapshotTurn,
    TurnRecorded,
)
from events.codec import AnyEvent
from projections import ensure_indexes, project
from projections.vectors import unpack_vector

pytestmark = pytest.mark.integration
PROVENANCE = Provenance(
    prompt_version="semantic-3",
    llm_model="scripted",
    embedding_model="scripted-embedding",
    embedding_dimensions=2,
)
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
Db = Database[dict[str, Any]]


@pytest.fixture
def db(mongo: Any) -> Iterator[Db]:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    database = client[f"proj_{uuid.uuid4().hex[:10]}"]
    ensure_indexes(database)
    yield database
    client.drop_database(database.name)
    client.close()


def evidence(snapshot: str = "snap-1", minutes: int = 0) -> Evidence:
    return Evidence(
        source="extraction",
        snapshot_id=snapshot,
        session_id="s",
        observed_at=T0 + timedelta(minutes=minutes),
    )


def content(text: str, subject: str = "the user", **attributes: Any) -> MemoryContent:
    return MemoryContent(
        subject=subject, owner="user", text=text, category="basic_info", attributes=attributes
    )


def history() -> list[AnyEvent]:
    """A memory added, reinforced, then updated; John's job; a named user turn and its snapshot."""
    turn = TurnRecorded(
        event_id="turn-1",
        occurred_at=T0,
        recorded_at=T0,
        user_id="tim",
        session_id="s",
        role="user",
        name="Tim",
        content="I live in Lisbon.",
    )
    snapshot = SnapshotPromoted(
        event_id="snap-1",
        occurred_at=T0,
        user_id="tim",
        session_id="s",
        seq=0,
        reason="flush",
        turns=(
            SnapshotTurn(
                turn_id="turn-1",
                role="user",
                name="Tim",
                content="I live in Lisbon.",
                occurred_at=T0,
            ),
        ),
    )
    return [
        snapshot,  # projected before its turn: linking must work in either order
        turn,
        SnapshotExtracted(
            event_id="x1",
            occurred_at=T0,
            snapshot_id="snap-1",
            user_id="tim",
            session_id="s",
            memory_type="semantic",
            decisions=(
                MemoryAdded(
                    event_id="e1",
                    occurred_at=T0,
                    memory_id="m1",
                    memory_type="semantic",
                    user_id="tim",
                    content=content("The user lives in Lisbon.", profile_field="location"),
                    embedding=(0.1, 0.2),
                    evidence=evidence(),
                    provenance=PROVENANCE,
                ),
                MemoryAdded(
                    event_id="e2",
                    occurred_at=T0,
                    memory_id="m2",
                    memory_type="semantic",
                    user_id="tim",
                    content=content("John is a nurse in Berlin.", subject="John"),
                    evidence=evidence(),
                    provenance=PROVENANCE,
                ),
            ),
            attempts=1,
        ),
        MemoryReinforced(
            event_id="e3",
            occurred_at=T0 + timedelta(minutes=1),
            memory_id="m1",
            memory_type="semantic",
            user_id="tim",
            version=1,
            evidence=evidence("snap-2", 1),
            provenance=PROVENANCE,
        ),
        MemoryUpdated(
            event_id="e4",
            occurred_at=T0 + timedelta(minutes=2),
            memory_id="m1",
            memory_type="semantic",
            user_id="tim",
            version=2,
            supersedes_version=1,
            content=content("The user lives in Porto.", profile_field="location"),
            evidence=evidence("snap-3", 2),
            provenance=PROVENANCE,
            reason="moved",
        ),
    ]


def read_model(database: Db) -> dict[str, list[dict[str, Any]]]:
    names = ("memories", "memory_events", "profiles", "turns", "snapshots")
    return {name: list(database[name].find().sort("_id", 1)) for name in names}


def test_versions_reinforcement_and_supersession(db: Db) -> None:
    for event in history():
        project(db, event)
    versions = {m["_id"]: m for m in db["memories"].find({"memory_id": "m1"})}
    old, new = versions["m1:v1"], versions["m1:v2"]
    assert old["status"] == "superseded"
    assert old["superseded_by"]["version"] == 2 and old["superseded_by"]["event_id"] == "e4"
    assert old["reinforcement_count"] == 1
    assert [e["snapshot_id"] for e in old["evidence"]] == ["snap-1", "snap-2"]
    assert new["status"] == "current" and new["text"] == "The user lives in Porto."
    assert db["memories"].count_documents({"memory_id": "m1", "status": "current"}) == 1
    assert db["memory_events"].count_documents({}) == 4
    assert db["turns"].find_one({"_id": "turn-1"})["snapshot_id"] == "snap-1"
    snapshot = db["snapshots"].find_one({"_id": "snap-1"})
    assert snapshot["extractions"]["semantic"]["memory_ids"] == ["m1", "m2"]
    assert snapshot["turn_count"] == 1


def test_a_memory_version_stores_its_vector_as_packed_float32s_and_its_event_the_floats(
    db: Db,
) -> None:
    for event in history():
        project(db, event)
    stored = {m["_id"]: m["embedding"] for m in db["memories"].find()}
    assert all(isinstance(v, Binary) and v.subtype == VECTOR_SUBTYPE for v in stored.values())
    assert unpack_vector(stored["m1:v1"]) == (0.10000000149011612, 0.20000000298023224)
    assert unpack_vector(stored["m2:v1"]) == ()  # added without a vector
    logged = db["memory_events"].find_one({"_id": "e1"})
    assert logged is not None and logged["event"]["embedding"] == [0.1, 0.2]


def test_profile_describes_only_the_current_user(db: Db) -> None:
    for event in history():
        project(db, event)
    profile = db["profiles"].find_one({"_id": "tim"})
    assert profile is not None
    assert profile["fields"]["name"]["value"] == "Tim"
    assert profile["fields"]["location"]["value"] == "The user lives in Porto."
    assert "occupation" not in profile["fields"]  # John's job never enters Tim's profile
    assert db["profiles"].count_documents({}) == 1  # and John gets no profile


def test_redelivering_any_event_changes_nothing(db: Db) -> None:
    events = history()
    for event in events:
        project(db, event)
    before = read_model(db)
    for event in reversed(events):
        project(db, event)
    for event in events:
        project(db, event)
    assert read_model(db) == before


def test_rebuild_from_the_log_equals_the_live_model(db: Db, mongo: Any) -> None:
    events = history()
    for event in events:
        project(db, event)
        project(db, event)  # at-least-once: every event twice on the live side
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    rebuilt = client[f"rebuilt_{uuid.uuid4().hex[:10]}"]
    try:
        ensure_indexes(rebuilt)
        for event in events:
            project(rebuilt, event)
        assert read_model(rebuilt) == read_model(db)
    finally:
        client.drop_database(rebuilt.name)
        client.close()


def test_extraction_record_before_its_snapshot_still_gives_a_whole_snapshot(db: Db) -> None:
    events = history()
    snapshot = next(e for e in events if isinstance(e, SnapshotPromoted))
    extracted = next(e for e in events if isinstance(e, SnapshotExtracted))
    project(db, extracted)  # the memories topic was read before the snapshots topic
    project(db, snapshot)
    document = db["snapshots"].find_one({"_id": snapshot.event_id})
    assert document is not None
    assert (document["user_id"], document["turn_count"]) == ("tim", 1)
    assert document["extractions"]["semantic"]["memory_ids"] == ["m1", "m2"]


def turn_event(turn_id: str, text: str, session: str = "s") -> TurnRecorded:
    return TurnRecorded(
        event_id=turn_id,
        occurred_at=T0,
        recorded_at=T0,
        user_id="tim",
        session_id=session,
        role="user",
        content=text,
    )


def snapshot_of(*turns: TurnRecorded, seq: int = 0) -> SnapshotPromoted:
    from events import snapshot_id

    first = turns[0]
    return SnapshotPromoted(
        event_id=snapshot_id(first.user_id, first.session_id, [t.event_id for t in turns]),
        occurred_at=T0,
        user_id=first.user_id,
        session_id=first.session_id,
        seq=seq,
        reason="flush",
        turns=tuple(
            SnapshotTurn(turn_id=t.event_id, role=t.role, content=t.content, occurred_at=T0)
            for t in turns
        ),
    )


def result_for(snapshot: SnapshotPromoted, *texts: str, attempts: int = 1) -> SnapshotExtracted:
    from tests import factories as f

    return f.extracted(snapshot, *(content(text) for text in texts), attempts=attempts)


def test_the_first_extraction_result_wins_over_a_re_extraction(db: Db) -> None:
    snapshot = snapshot_of(turn_event("t1", "I work at Stripe."))
    first = result_for(snapshot, "The user works at Stripe.")
    second = result_for(snapshot, "The user works in payments.", "The user is at Stripe.")
    assert first.event_id == second.event_id  # the same snapshot and type: one result id
    for event in (snapshot, first, second, first, second):
        project(db, event)
    texts = [m["text"] for m in db["memories"].find({"user_id": "tim"})]
    assert texts == ["The user works at Stripe."]
    assert db["memory_events"].count_documents({}) == 1
    record = db["snapshots"].find_one({"_id": snapshot.event_id})["extractions"]["semantic"]
    assert record["memory_ids"] == list(first.memory_ids)


def test_a_first_result_half_applied_before_a_crash_is_completed_by_its_redelivery(
    db: Db,
) -> None:
    snapshot = snapshot_of(turn_event("t1", "I work at Stripe and I like tea."))
    first = result_for(snapshot, "The user works at Stripe.", "The user likes tea.")
    partial_view = first.model_copy(update={"decisions": first.decisions[:1]})
    from projections.memories import project_memory_event
    from projections.writes import LiveWrites

    live = LiveWrites(db)
    record = {"event_id": first.event_id}
    from projections.extractions import result_fingerprint

    fingerprint = result_fingerprint(first)
    assert live.claim("snapshots", snapshot.event_id, "extractions.semantic", record, fingerprint)
    project_memory_event(live, partial_view.decisions[0])  # then the crash
    project(db, first)  # the redelivery
    assert db["memories"].count_documents({"user_id": "tim"}) == 2


def test_extraction_records_before_their_snapshots_are_never_refused(db: Db) -> None:
    """A rebuild may read the memories topic before the snapshots topic."""
    one = snapshot_of(turn_event("t1", "I work at Stripe."), seq=0)
    two = snapshot_of(turn_event("t2", "I like tea."), seq=1)
    for event in (result_for(one, "The user works at Stripe."), result_for(two), one, two):
        project(db, event)
    documents = list(db["snapshots"].find().sort("seq", 1))
    assert [(d["seq"], d["turn_count"]) for d in documents] == [(0, 1), (1, 1)]
    assert all("semantic" in d["extractions"] for d in documents)


def test_a_reused_session_id_after_a_lost_log_keeps_both_snapshots(db: Db) -> None:
    first_life = snapshot_of(turn_event("t1", "I live in Lisbon."), seq=0)
    second_life = snapshot_of(turn_event("t2", "I moved to Porto."), seq=0)
    for event in (first_life, second_life):
        project(db, event)
    stored = {d["_id"]: d["turn_ids"] for d in db["snapshots"].find({"session_id": "s"})}
    assert stored == {first_life.event_id: ["t1"], second_life.event_id: ["t2"]}


def test_a_turn_id_reused_for_other_content_is_a_collision(db: Db) -> None:
    from projections import IdCollision

    project(db, turn_event("t1", "I live in Lisbon."))
    project(db, turn_event("t1", "I live in Lisbon."))  # a redelivery is fine
    with pytest.raises(IdCollision, match="turns 't1'"):
        project(db, turn_event("t1", "I live in Porto."))
    assert db["turns"].find_one({"_id": "t1"})["content"] == "I live in Lisbon."


def test_a_snapshot_id_naming_other_turns_is_a_collision(db: Db) -> None:
    from projections import IdCollision

    snapshot = snapshot_of(turn_event("t1", "I live in Lisbon."))
    project(db, snapshot)
    forged = snapshot.model_copy(update={"turns": snapshot_of(turn_event("t9", "x")).turns})
    with pytest.raises(IdCollision, match="already holds other turns"):
        project(db, forged)


def test_a_memory_event_id_reused_for_other_content_is_a_collision(db: Db) -> None:
    from projections import IdCollision

    added = MemoryAdded(
        event_id="e1",
        occurred_at=T0,
        memory_id="m1",
        memory_type="semantic",
        user_id="tim",
        content=content("The user lives in Lisbon."),
        evidence=evidence(),
        provenance=PROVENANCE,
    )
    project(db, added)
    project(db, added)
    with pytest.raises(IdCollision):
        project(db, added.model_copy(update={"content": content("The user lives in Porto.")}))


def test_a_replay_in_batches_builds_the_same_read_model_as_live_projection(
    db: Db, mongo: Any
) -> None:
    from projections import project_batch

    snapshot = snapshot_of(turn_event("t1", "I work at Stripe."))
    events: list[AnyEvent] = [
        *history(),
        turn_event("t1", "I work at Stripe."),
        snapshot,
        result_for(snapshot, "The user works at Stripe."),
        result_for(snapshot, "Something a re-extraction said."),  # a later result: ignored
        turn_event("t1", "I work at Stripe."),  # a redelivery
    ]
    for event in events:
        project(db, event)
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    rebuilt = client[f"bulk_{uuid.uuid4().hex[:10]}"]
    try:
        ensure_indexes(rebuilt)
        turns_first = sorted(events, key=lambda e: not isinstance(e, TurnRecorded))
        for start in range(0, len(turns_first), 3):  # small batches: ordering across batches too
            outcome = project_batch(rebuilt, [(e, None) for e in turns_first[start : start + 3]])
            assert outcome.errors == [None] * len(outcome.errors)
        assert read_model(rebuilt) == read_model(db)
    finally:
        client.drop_database(rebuilt.name)
        client.close()


def test_a_batch_dead_letters_a_collision_and_goes_on(db: Db) -> None:
    from projections import IdCollision, project_batch

    batch = [turn_event("t1", "Lisbon."), turn_event("t1", "Porto."), turn_event("t2", "x")]
    outcome = project_batch(db, [(event, None) for event in batch])
    first, collided, last = outcome.errors
    assert first is None and last is None
    assert (
        isinstance(collided, IdCollision)
        and str(collided) == "turns 't1' already holds other content"
    )
    assert db["turns"].count_documents({}) == 2


def test_a_collision_half_way_through_a_result_keeps_its_earlier_writes_only(db: Db) -> None:
    from projections import IdCollision, project_batch

    snapshot = snapshot_of(turn_event("t1", "I work at Stripe and I like tea."))
    first = result_for(snapshot, "The user works at Stripe.")
    taken = first.decisions[0]
    clashing = result_for(snapshot, "The user likes tea.", "The user likes coffee.")
    clashing = clashing.model_copy(
        update={
            "snapshot_id": "other",
            "event_id": "x-other",
            "decisions": (
                clashing.decisions[0],
                taken.model_copy(update={"content": content("Not what it said.")}),
                clashing.decisions[1],
            ),
        }
    )
    outcome = project_batch(db, [(first, None), (clashing, None)])
    assert outcome.errors[0] is None and isinstance(outcome.errors[1], IdCollision)
    texts = {d["text"] for d in db["memories"].find()}
    assert texts == {"The user works at Stripe.", "The user likes tea."}  # coffee never came


def test_every_projected_memory_event_bumps_its_users_write_count(db: Db) -> None:
    events = history()
    memory_events = [
        e for e in events if e.event_type in ("MemoryAdded", "MemoryReinforced", "MemoryUpdated")
    ] + [d for e in events for d in getattr(e, "decisions", ())]
    for event in events:
        project(db, event)
    counted = db["memory_writes"].find_one({"_id": "tim"})
    assert counted is not None and counted["count"] == len(memory_events) > 0
    project(db, memory_events[-1])  # a redelivery counts too: the count is a change signal
    again = db["memory_writes"].find_one({"_id": "tim"})
    assert again is not None and again["count"] == len(memory_events) + 1
