"""Forgetting in the read model, projected live and replayed in bulk: each request erases exactly
its data (other users and sessions untouched), a redelivery changes nothing more, the receipt
holds counts and ids but no content, and what the log holds after an erasure is kept."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
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
from events.forgetting import (
    MemoriesForgotten,
    MemoryForgotten,
    SessionForgotten,
    SessionsForgotten,
    UserForgotten,
)
from events.memories import MEMORY_TYPES, MemoryType, derived_id
from events.saves import MemorySaved
from events.snapshots import snapshot_id
from projections import ensure_indexes, project, project_batch

pytestmark = pytest.mark.integration
Db = Database[dict[str, Any]]
Logged = tuple[AnyEvent, int | None]
"""An event and the partition it was read from (turns: the turns-topic partition)."""
Projector = Callable[[Sequence[Logged]], None]

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
PROVENANCE = Provenance(
    prompt_version="semantic-3",
    llm_model="scripted",
    embedding_model="scripted-embedding",
    embedding_dimensions=2,
)
PARTITIONS = 2
TIM_S1, TIM_S2, ANN_S1 = 0, 1, 0  # the turns-topic partition of each session
READ_MODEL = ("turns", "snapshots", "memories", "memory_events", "saves", "profiles")


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


# -- the read model of two users and two sessions ----------------------------------------------


def turn(user: str, session: str, n: int, text: str, name: str | None = None) -> TurnRecorded:
    return TurnRecorded(
        event_id=f"{user}-{session}-t{n}",
        occurred_at=at(n),
        recorded_at=at(n),
        user_id=user,
        session_id=session,
        role="user",
        name=name,
        content=text,
    )


def snapshot(*turns: TurnRecorded) -> SnapshotPromoted:
    first = turns[0]
    return SnapshotPromoted(
        event_id=snapshot_id(first.user_id, first.session_id, [t.event_id for t in turns]),
        occurred_at=turns[-1].occurred_at,
        user_id=first.user_id,
        session_id=first.session_id,
        seq=0,
        reason="flush",
        turns=tuple(
            SnapshotTurn(
                turn_id=t.event_id,
                role=t.role,
                name=t.name,
                content=t.content,
                occurred_at=t.occurred_at,
            )
            for t in turns
        ),
    )


def evidence_of(source: SnapshotPromoted | None, minutes: int) -> Evidence:
    if source is None:
        return Evidence(source="sdk", observed_at=at(minutes))
    return Evidence(
        source="extraction",
        snapshot_id=source.event_id,
        session_id=source.session_id,
        observed_at=at(minutes),
    )


def content(text: str, profile_field: str | None = None) -> MemoryContent:
    attributes = {"profile_field": profile_field} if profile_field else {}
    return MemoryContent(
        subject="the user", owner="user", text=text, category="basic_info", attributes=attributes
    )


def added(
    memory_id: str,
    user: str,
    text: str,
    source: SnapshotPromoted | None,
    minutes: int,
    profile_field: str | None = None,
) -> MemoryAdded:
    return MemoryAdded(
        event_id=f"add-{memory_id}",
        occurred_at=at(minutes),
        memory_id=memory_id,
        memory_type="semantic",
        user_id=user,
        content=content(text, profile_field),
        embedding=(1.0, 0.0),
        evidence=evidence_of(source, minutes),
        provenance=PROVENANCE,
    )


def extracted(source: SnapshotPromoted, *decisions: Any) -> SnapshotExtracted:
    return SnapshotExtracted(
        event_id=f"x-{source.event_id}",
        occurred_at=source.occurred_at,
        snapshot_id=source.event_id,
        user_id=source.user_id,
        session_id=source.session_id,
        memory_type="semantic",
        decisions=decisions,
        attempts=1,
    )


TIM_1 = turn("tim", "s1", 1, "I live in Lisbon.", name="Tim")
TIM_2 = turn("tim", "s1", 2, "I have a dog.")
TIM_3 = turn("tim", "s2", 3, "Still in Lisbon; my dog is two now.")
TIM_4 = turn("tim", "s2", 4, "I work at Stripe.")
ANN_1 = turn("ann", "s1", 1, "I live in Porto.", name="Ann")
SNAP_A, SNAP_B, SNAP_C = snapshot(TIM_1, TIM_2), snapshot(TIM_3, TIM_4), snapshot(ANN_1)
SAVE = MemorySaved(
    event_id="saved-tea",
    occurred_at=at(6),
    save_id="save-tea",
    user_id="tim",
    memory_type="semantic",
    decisions=(added("m-tea", "tim", "The user drinks tea.", None, 6, "drink"),),
)
TURN_TEXTS = [t.content for t in (TIM_1, TIM_2, TIM_3, TIM_4, ANN_1)]
TEXTS = [  # every text the world holds: none may appear on a receipt
    *TURN_TEXTS,
    "The user lives in Lisbon.",
    "The user has a dog.",
    "The user has a two-year-old dog.",
    "The user works at Stripe.",
    "The user drinks tea.",
    "The user lives in Porto.",
    "Tim",
]


def world() -> list[Logged]:
    """Tim: session s1 (partition 0) adds m-home (his location) and m-dog; session s2
    (partition 1) reinforces m-home, updates m-dog to v2 and adds m-job (his employer); a direct
    save adds m-tea. Ann: session s1 (partition 0) adds a-home. Named turns name both."""
    return [
        (TIM_1, TIM_S1),
        (TIM_2, TIM_S1),
        (ANN_1, ANN_S1),
        (TIM_3, TIM_S2),
        (TIM_4, TIM_S2),
        (SNAP_A, 0),
        (SNAP_C, 1),
        (SNAP_B, 0),
        (
            extracted(
                SNAP_A,
                added("m-home", "tim", "The user lives in Lisbon.", SNAP_A, 2, "location"),
                added("m-dog", "tim", "The user has a dog.", SNAP_A, 2),
            ),
            0,
        ),
        (
            extracted(
                SNAP_C, added("a-home", "ann", "The user lives in Porto.", SNAP_C, 1, "location")
            ),
            1,
        ),
        (
            extracted(
                SNAP_B,
                MemoryReinforced(
                    event_id="reinforce-m-home",
                    occurred_at=at(4),
                    memory_id="m-home",
                    memory_type="semantic",
                    user_id="tim",
                    version=1,
                    evidence=evidence_of(SNAP_B, 4),
                    provenance=PROVENANCE,
                ),
                MemoryUpdated(
                    event_id="update-m-dog",
                    occurred_at=at(4),
                    memory_id="m-dog",
                    memory_type="semantic",
                    user_id="tim",
                    version=2,
                    supersedes_version=1,
                    content=content("The user has a two-year-old dog."),
                    embedding=(1.0, 0.0),
                    evidence=evidence_of(SNAP_B, 4),
                    provenance=PROVENANCE,
                ),
                added("m-job", "tim", "The user works at Stripe.", SNAP_B, 4, "employer"),
            ),
            0,
        ),
        (SAVE, 0),
    ]


# -- the erasures, as the window and the memory stages write them --------------------------------


def memories_forgotten(
    request_id: str,
    scope: Any,
    input_event_id: str,
    memory_ids: Sequence[str] = (),
    session_ids: Sequence[str] = (),
    saves: bool = False,
    memory_type: MemoryType = "semantic",
) -> MemoriesForgotten:
    return MemoriesForgotten(
        event_id=derived_id("memories-forgotten", memory_type, input_event_id),
        occurred_at=at(20),
        request_id=request_id,
        scope=scope,
        user_id="tim",
        memory_type=memory_type,
        memory_ids=tuple(memory_ids),
        session_ids=tuple(session_ids),
        saves=saves,
    )


def sessions_forgotten(
    request_id: str, scope: Any, sessions: Sequence[str], partition: int
) -> SessionsForgotten:
    return SessionsForgotten(
        event_id=derived_id("sessions-forgotten", request_id, partition),
        occurred_at=at(20),
        request_id=request_id,
        scope=scope,
        user_id="tim",
        session_ids=tuple(sessions),
        turns_partition=partition,
    )


def forget_session_s2() -> list[Logged]:
    """Tim forgets s2: the window's fact, then each memory type's (only semantic has memories)."""
    request = SessionForgotten(
        event_id="forget-s2",
        occurred_at=at(20),
        user_id="tim",
        session_id="s2",
        requested_by="cli:alice",
        reason="asked by the user",
    )
    fact = sessions_forgotten("forget-s2", "session", ["s2"], TIM_S2)
    found = {"semantic": ["m-dog", "m-job"]}  # m-home was only reinforced by s2: it stays
    return [
        (request, TIM_S2),
        (fact, 0),
        *(
            (
                memories_forgotten(
                    "forget-s2", "session", fact.event_id, found.get(t, []), ["s2"], memory_type=t
                ),
                0,
            )
            for t in MEMORY_TYPES
        ),
    ]


def forget_user_tim() -> list[Logged]:
    """Tim forgets everything: a copy per turns partition and one on the snapshots topic."""
    copies = [
        UserForgotten(
            event_id="forget-tim",
            occurred_at=at(20),
            user_id="tim",
            requested_by="service_account:app",
            turns_partition=partition,
        )
        for partition in [*range(PARTITIONS), None]
    ]
    facts = [sessions_forgotten("forget-tim", "user", [s], p) for s, p in (("s1", 0), ("s2", 1))]
    first = memories_forgotten("forget-tim", "user", facts[0].event_id, ["m-home", "m-dog"], ["s1"])
    second = memories_forgotten("forget-tim", "user", facts[1].event_id, ["m-dog", "m-job"], ["s2"])
    saves = memories_forgotten("forget-tim", "user", "forget-tim", ["m-tea"], saves=True)
    return [
        (copies[0], 0),
        (copies[1], 1),
        (copies[2], 0),
        (facts[0], 0),
        (facts[1], 0),
        (first, 0),
        (second, 0),
        (saves, 0),
    ]


def forget_memory_home() -> list[Logged]:
    request = MemoryForgotten(
        event_id="forget-home",
        occurred_at=at(20),
        user_id="tim",
        memory_id="m-home",
        memory_type="semantic",
        requested_by="cli:alice",
    )
    return [
        (request, 0),
        (memories_forgotten("forget-home", "memory", "forget-home", ["m-home"]), 0),
    ]


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture
def client(mongo: Any) -> Iterator[MongoClient[dict[str, Any]]]:
    mongo_client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    yield mongo_client
    mongo_client.close()


@pytest.fixture
def db(client: MongoClient[dict[str, Any]]) -> Iterator[Db]:
    database = client[f"forget_{uuid.uuid4().hex[:10]}"]
    ensure_indexes(database)
    yield database
    client.drop_database(database.name)


def live(db: Db) -> Projector:
    def apply(log: Sequence[Logged]) -> None:
        for event, partition in log:
            project(db, event, partition=partition)

    return apply


def bulk(db: Db) -> Projector:
    def apply(log: Sequence[Logged]) -> None:
        for start in range(0, len(log), 3):  # small batches, to cross them
            outcome = project_batch(db, log[start : start + 3])
            assert outcome.errors == [None] * len(outcome.errors)

    return apply


@pytest.fixture(params=[live, bulk], ids=["live", "bulk"])
def projected(request: pytest.FixtureRequest, db: Db) -> Projector:
    """Projects a log into `db` record by record, or in batches (the projector's, a replay's)."""
    executor: Callable[[Db], Projector] = request.param
    return executor(db)


def read_model(database: Db) -> dict[str, dict[Any, dict[str, Any]]]:
    return {name: {d["_id"]: d for d in database[name].find()} for name in READ_MODEL}


def without(
    model: dict[str, dict[Any, dict[str, Any]]], **erased: Sequence[str]
) -> dict[str, dict[Any, dict[str, Any]]]:
    """`model` without the documents `erased` names, by collection."""
    return {
        name: {i: d for i, d in documents.items() if i not in erased.get(name, ())}
        for name, documents in model.items()
    }


def receipt(db: Db, request_id: str) -> dict[str, Any]:
    found = db["erasures"].find_one({"_id": request_id})
    assert found is not None
    return found


# -- each kind erases exactly its data ----------------------------------------------------------


def test_forgetting_a_session_erases_its_turns_snapshots_and_memories_and_nothing_else(
    db: Db, projected: Projector
) -> None:
    projected(world())
    before = read_model(db)
    projected(forget_session_s2())
    after = read_model(db)

    expected = without(
        before,
        turns=[TIM_3.event_id, TIM_4.event_id],
        snapshots=[SNAP_B.event_id],
        memories=["m-dog:v1", "m-dog:v2", "m-job:v1"],
        memory_events=["add-m-dog", "update-m-dog", "add-m-job", "reinforce-m-home"],
    )
    home, profile = after["memories"].pop("m-home:v1"), after["profiles"].pop("tim")
    expected["memories"].pop("m-home:v1"), expected["profiles"].pop("tim")
    assert after == expected  # everything else, Ann's included, is as it was
    assert [e["session_id"] for e in home["evidence"]] == ["s1"]  # s2's reinforcement is gone
    assert home["reinforcement_count"] == 0
    assert sorted(profile["fields"]) == ["drink", "location", "name"]  # the employer came from s2


def test_another_types_fact_for_the_session_leaves_this_types_evidence_and_log(
    db: Db, projected: Projector
) -> None:
    """The episodic stage's fact for s2 may be projected before the semantic stage reads the
    request; the semantic memories must still show s2 then, or that stage would find nothing of
    s2 to forget."""
    projected(world())
    before = read_model(db)
    fact = sessions_forgotten("forget-s2", "session", ["s2"], TIM_S2)
    episodic = memories_forgotten(
        "forget-s2", "session", fact.event_id, [], ["s2"], memory_type="episodic"
    )
    projected([(episodic, 0)])
    after = read_model(db)

    assert after["memories"] == before["memories"]
    assert after["memory_events"] == before["memory_events"]


def test_forgetting_a_user_leaves_nothing_of_them_and_everything_of_others(
    db: Db, projected: Projector
) -> None:
    projected(world())
    before = read_model(db)
    projected(forget_user_tim())
    after = read_model(db)

    for name, documents in after.items():
        assert not [d for d in documents.values() if d.get("user_id") == "tim"], name
    assert "tim" not in after["profiles"]
    assert after == {
        name: {i: d for i, d in documents.items() if d.get("user_id") != "tim"}
        for name, documents in before.items()
    }
    assert after["profiles"]["ann"] == before["profiles"]["ann"]


def test_forgetting_a_memory_erases_every_version_its_log_and_its_profile_field(
    db: Db, projected: Projector
) -> None:
    projected(world())
    before = read_model(db)
    projected(forget_memory_home())
    after = read_model(db)

    profile = after["profiles"].pop("tim")
    expected = without(
        before, memories=["m-home:v1"], memory_events=["add-m-home", "reinforce-m-home"]
    )
    expected["profiles"].pop("tim")
    assert after == expected
    assert sorted(profile["fields"]) == ["drink", "employer", "name"]


def test_a_user_turn_of_unknown_partition_is_erased_by_the_first_copy(
    db: Db, projected: Projector
) -> None:
    """Turns projected before turns kept their partition match every `UserForgotten` copy."""
    old_turn = turn("tim", "s9", 9, "An old turn.")
    projected([(old_turn, None), (TIM_3, TIM_S2)])
    first_copy = forget_user_tim()[0]
    assert isinstance(first_copy[0], UserForgotten) and first_copy[0].turns_partition == 0
    projected([first_copy])
    assert [t["_id"] for t in db["turns"].find()] == [TIM_3.event_id]  # partition 1's stays


# -- redeliveries, receipts, new data -----------------------------------------------------------


@pytest.mark.parametrize("erasure", [forget_session_s2, forget_user_tim, forget_memory_home])
def test_redelivering_the_erasure_changes_nothing_more(
    db: Db, projected: Projector, erasure: Callable[[], list[Logged]]
) -> None:
    projected(world())
    projected(erasure())
    once = read_model(db), list(db["erasures"].find())
    projected(erasure())
    assert (read_model(db), list(db["erasures"].find())) == once


def test_projecting_the_whole_log_again_ends_in_the_same_read_model_and_receipt(
    db: Db, projected: Projector
) -> None:
    """At-least-once: the log from the start, the erasure again after the data it erases."""
    log = [*world(), *forget_session_s2()]
    projected(log)
    once = read_model(db), list(db["erasures"].find())
    projected(log)
    assert (read_model(db), list(db["erasures"].find())) == once


def test_a_session_receipt_names_the_request_and_counts_every_step_without_content(
    db: Db, projected: Projector
) -> None:
    projected(world())
    projected(forget_session_s2())
    found = receipt(db, "forget-s2")
    steps = found.pop("steps")
    assert found == {
        "_id": "forget-s2",
        "kind": "session",
        "user_id": "tim",
        "session_id": "s2",
        "requested_by": "cli:alice",
        "reason": "asked by the user",
        "requested_at": at(20),
    }
    fact = sessions_forgotten("forget-s2", "session", ["s2"], TIM_S2)
    semantic = memories_forgotten("forget-s2", "session", fact.event_id)
    assert len(steps) == 1 + 1 + len(MEMORY_TYPES)
    assert steps["turns"] == {"topic": "turns", "at": at(20), "turns": 2}
    assert steps[f"snapshots-{fact.event_id}"] == {
        "topic": "snapshots",
        "at": at(20),
        "snapshots": 1,
        "sessions": 1,
    }
    assert steps[f"memories-{semantic.event_id}"] == {
        "topic": "memories",
        "at": at(20),
        "memory_type": "semantic",
        "memory_ids": ["m-dog", "m-job"],
        "memories": 2,
        "versions": 3,
        "saves": 0,
    }
    assert not [text for text in TEXTS if text in repr(receipt(db, "forget-s2"))]


def test_a_user_receipt_has_a_step_per_partition_and_per_memory_fact(
    db: Db, projected: Projector
) -> None:
    projected(world())
    projected(forget_user_tim())
    found = receipt(db, "forget-tim")
    assert (found["kind"], found["user_id"], found["requested_by"]) == (
        "user",
        "tim",
        "service_account:app",
    )
    steps = found["steps"]
    assert {s: steps[s]["turns"] for s in steps if s.startswith("turns-")} == {
        "turns-0": 2,
        "turns-1": 2,
    }
    snapshot_steps = [v for s, v in steps.items() if s.startswith("snapshots-")]
    assert sorted(v["snapshots"] for v in snapshot_steps) == [1, 1]
    memory_steps = [v for s, v in steps.items() if s.startswith("memories-")]
    assert sum(v["versions"] for v in memory_steps) == 5  # home, dog v1+v2, job, tea
    assert sum(v["saves"] for v in memory_steps) == 1
    assert not [text for text in TEXTS if text in repr(found)]


def test_a_stage_fact_arriving_before_its_request_still_gets_the_requests_fields(
    db: Db, projected: Projector
) -> None:
    """Topics are projected independently: the memories topic may be read first."""
    request, fact = forget_memory_home()
    projected([fact])
    assert receipt(db, "forget-home")["kind"] == "memory"
    projected([request])
    found = receipt(db, "forget-home")
    assert (found["requested_by"], found["memory_id"], found["requested_at"]) == (
        "cli:alice",
        "m-home",
        at(20),
    )


def test_what_the_log_holds_after_an_erasure_is_kept(db: Db, projected: Projector) -> None:
    projected(world())
    projected(forget_session_s2())
    again = turn("tim", "s2", 30, "I work at Stripe again.")
    snap = snapshot(again)
    job = added("m-job-2", "tim", "The user works at Stripe.", snap, 30, "employer")
    projected([(again, TIM_S2), (snap, 0), (extracted(snap, job), 0)])
    assert db["turns"].count_documents({"session_id": "s2"}) == 1
    assert db["snapshots"].count_documents({"_id": snap.event_id}) == 1
    assert db["memories"].count_documents({"memory_id": "m-job-2"}) == 1
    profile = db["profiles"].find_one({"_id": "tim"})
    assert profile is not None and profile["fields"]["employer"]["memory_id"] == "m-job-2"


def test_a_forgotten_user_who_comes_back_starts_a_new_profile(db: Db, projected: Projector) -> None:
    projected(world())
    projected(forget_user_tim())
    projected([(turn("tim", "s3", 40, "Hello again.", name="Timothy"), 1)])
    profile = db["profiles"].find_one({"_id": "tim"})
    assert profile is not None and list(profile["fields"]) == ["name"]
    assert profile["fields"]["name"]["value"] == "Timothy"


def test_a_batch_erases_after_the_writes_before_it_and_an_id_written_after_it_is_new(
    db: Db,
) -> None:
    tim = turn("tim", "s1", 1, "I live in Lisbon.")
    forget = SessionForgotten(
        event_id="forget-s1", occurred_at=at(20), user_id="tim", session_id="s1", requested_by="x"
    )
    outcome = project_batch(db, [(tim, 0), (forget, 0), (forget, 0), (tim, 0)])
    assert outcome.errors == [None] * 4
    assert [d["_id"] for d in db["turns"].find()] == [tim.event_id]  # written again after
    assert receipt(db, "forget-s1")["steps"]["turns"]["turns"] == 1


# -- live and replay agree; search forgets ------------------------------------------------------


@pytest.mark.parametrize(
    "erasures",
    [[forget_session_s2, forget_memory_home], [forget_user_tim]],
    ids=["session-then-memory", "user"],
)
def test_a_replay_in_topic_order_builds_the_same_read_model_and_receipts_as_live(
    db: Db,
    client: MongoClient[dict[str, Any]],
    erasures: list[Callable[[], list[Logged]]],
) -> None:
    """A replay reads the turns topic, then snapshots, then memories: stubs and all converge."""
    log = [*world(), *(logged for erasure in erasures for logged in erasure())]
    live(db)(log)
    rebuilt = client[f"forget_bulk_{uuid.uuid4().hex[:10]}"]
    try:
        ensure_indexes(rebuilt)
        topic_of = {"TurnRecorded": 0, "SessionForgotten": 0, "UserForgotten": 0}
        memories = ("SnapshotExtracted", "MemorySaved", "MemoriesForgotten")
        replay_order = sorted(
            log,
            key=lambda e: topic_of.get(e[0].event_type, 2 if e[0].event_type in memories else 1),
        )
        bulk(rebuilt)(replay_order)
        assert read_model(rebuilt) == read_model(db)
        assert list(rebuilt["erasures"].find()) == list(db["erasures"].find())
    finally:
        client.drop_database(rebuilt.name)


def test_search_stops_finding_a_memory_once_it_is_erased(db: Db, mongo: Any) -> None:
    from memstream.sdk.read_model import ReadModel

    live(db)(world())

    async def searches() -> tuple[list[str], list[str], list[str]]:
        read_model, fresh = ReadModel(mongo.uri, db.name), ReadModel(mongo.uri, db.name)
        try:
            query = ("dog", [1.0, 0.0], "scripted-embedding")
            before = [m["memory_id"] for m in await read_model.search("tim", *query)]
            await asyncio.to_thread(live(db), forget_session_s2())
            after = [m["memory_id"] for m in await read_model.search("tim", *query)]
            rebuilt = [m["memory_id"] for m in await fresh.search("tim", *query)]
            return sorted(before), sorted(after), sorted(rebuilt)
        finally:
            await read_model.close()
            await fresh.close()

    before, after, rebuilt = asyncio.run(searches())
    assert before == ["m-dog", "m-home", "m-job", "m-tea"]
    assert after == rebuilt == ["m-home", "m-tea"]  # the cached index updated, as a new one
