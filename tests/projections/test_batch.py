"""The batch executor against the live one: random logs (tests/support/projection_log.py)
projected in random batches by `project_batch` and record by record by `project` end in the
same database, document for document, with the same error for the same records; a batch an
outage interrupted, projected again, ends as projected once; another projector's writes between
a batch's reads and its writes are noticed."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.database import Database
from pymongo.errors import AutoReconnect

import projections.batch as batch_module
from events.memories import Evidence, MemoryAdded, MemoryContent
from events.snapshots import SnapshotPromoted
from events.turns import TurnRecorded
from projections import ensure_indexes, project, project_batch
from projections.batch import BatchOutcome
from projections.store import MEMORY_WRITES, TURNS
from tests.support.projection_log import T0, Logged, random_log

pytestmark = pytest.mark.integration
Db = Database[dict[str, Any]]
SEEDS = range(8)


@pytest.fixture
def client(mongo: Any) -> Iterator[MongoClient[dict[str, Any]]]:
    connection: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    yield connection
    connection.close()


@pytest.fixture
def databases(client: MongoClient[dict[str, Any]]) -> Iterator[tuple[Db, Db]]:
    run = uuid.uuid4().hex[:10]
    pair = (client[f"live_{run}"], client[f"batch_{run}"])
    for database in pair:
        ensure_indexes(database)
    yield pair
    for database in pair:
        client.drop_database(database.name)


def one_by_one(db: Db, log: Sequence[Logged]) -> list[str | None]:
    errors: list[str | None] = []
    for event, partition in log:
        try:
            project(db, event, partition=partition)
        except Exception as exc:
            errors.append(repr(exc))
        else:
            errors.append(None)
    return errors


def in_batches(db: Db, log: Sequence[Logged], rng: random.Random) -> tuple[list[str | None], int]:
    """The log in batches of random sizes; the errors, and how many runs were decided again or
    fell back to record by record."""
    errors: list[str | None] = []
    fallbacks = 0
    start = 0
    while start < len(log):
        size = rng.choice((1, 2, 5, 17, 40, 200))
        outcome: BatchOutcome = project_batch(db, log[start : start + size])
        errors.extend(None if e is None else repr(e) for e in outcome.errors)
        fallbacks += outcome.fallbacks + outcome.retries
        start += size
    return errors, fallbacks


def read_model(db: Db) -> dict[str, dict[Any, dict[str, Any]]]:
    return {name: {d["_id"]: d for d in db[name].find()} for name in db.list_collection_names()}


def differing(live: Db, batch: Db) -> list[str]:
    left, right = read_model(live), read_model(batch)
    found = []
    for name in sorted(set(left) | set(right)):
        mine, theirs = left.get(name, {}), right.get(name, {})
        for doc_id in sorted(set(mine) | set(theirs), key=str):
            if mine.get(doc_id) != theirs.get(doc_id):
                found.append(f"{name} {doc_id!r}: {mine.get(doc_id)} != {theirs.get(doc_id)}")
    return found


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_log_in_random_batches_ends_as_projected_record_by_record(
    databases: tuple[Db, Db], seed: int
) -> None:
    live, batch = databases
    log = random_log(seed, 120)
    expected = one_by_one(live, log)
    errors, fallbacks = in_batches(batch, log, random.Random(seed))
    assert differing(live, batch) == []
    assert errors == expected
    assert fallbacks == 0  # every run decided once, in bulk: none refused, none one by one
    assert any(expected)  # the log did collide somewhere: the test saw the error path


def test_the_random_logs_hold_every_kind_of_record_and_collision() -> None:
    kinds = {type(event).__name__ for seed in SEEDS for event, _ in random_log(seed, 120)}
    assert kinds >= {
        "TurnRecorded",
        "SnapshotPromoted",
        "SnapshotExtracted",
        "MemorySaved",
        "MemoryRolledBack",
        "MemoriesConsolidated",
        "MemoryAdded",
        "InputDeadLettered",
        "DeadLetterRedriven",
        "SessionForgotten",
        "UserForgotten",
        "SessionsForgotten",
        "MemoriesForgotten",
        "MemoryForgotten",
        "MemoryExpired",
    }


def without_counter(db: Db) -> dict[str, dict[Any, dict[str, Any]]]:
    """The read model but `memory_writes`, which counts every delivery (a redelivery too)."""
    model = read_model(db)
    model.pop(MEMORY_WRITES, None)
    return model


@pytest.mark.parametrize("interrupted_after", [0, 1, 3, 6])
def test_a_batch_an_outage_interrupts_half_way_ends_as_once_when_projected_again(
    databases: tuple[Db, Db], monkeypatch: pytest.MonkeyPatch, interrupted_after: int
) -> None:
    once, twice = databases
    log = random_log(21, 90)
    expected = project_batch(once, log).errors
    sent = 0
    real_bulk = batch_module._bulk

    def failing_bulk(db: Db, collection: str, operations: list[Any]) -> None:
        nonlocal sent
        sent += 1
        if sent > interrupted_after:
            raise AutoReconnect("the database went away")
        real_bulk(db, collection, operations)

    monkeypatch.setattr(batch_module, "_bulk", failing_bulk)
    with pytest.raises(AutoReconnect):
        project_batch(twice, log)
    monkeypatch.setattr(batch_module, "_bulk", real_bulk)
    again = project_batch(twice, log)  # the projector's retry: the same records
    assert [repr(e) for e in again.errors] == [repr(e) for e in expected]
    assert without_counter(twice) == without_counter(once)


def test_a_batch_whose_document_another_projector_wrote_meanwhile_is_decided_again(
    databases: tuple[Db, Db], monkeypatch: pytest.MonkeyPatch
) -> None:
    reference, db = databases
    log = random_log(4, 60)
    turn = next(event for event, _ in log if isinstance(event, TurnRecorded))
    expected = one_by_one(reference, log)
    real_fetch = batch_module._fetch
    fetched: list[Any] = []

    def fetch_then_another_projector(db: Db, plans: Any) -> Any:
        decider = real_fetch(db, plans)
        if (TURNS, turn.event_id) in decider.known:
            fetched.append(decider.known[(TURNS, turn.event_id)])
        if decider.known.get((TURNS, turn.event_id), "") is None:  # fetched: not there yet
            project(db, turn, partition=0)  # written by another projector after the fetch
        return decider

    monkeypatch.setattr(batch_module, "_fetch", fetch_then_another_projector)
    outcome = project_batch(db, log)
    assert fetched[0] is None and fetched[1]["fingerprint"]  # refused, fetched again: stored
    assert [None if e is None else repr(e) for e in outcome.errors] == expected
    assert without_counter(db) == without_counter(reference)


def test_a_turn_is_linked_to_a_snapshot_another_projector_wrote_while_the_batch_decided(
    databases: tuple[Db, Db], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, db = databases
    log = random_log(2, 40)
    snapshot = next(event for event, _ in log if isinstance(event, SnapshotPromoted))
    turns = [
        (t, 0) for t, _ in log if isinstance(t, TurnRecorded) and t.event_id in snapshot.turn_ids
    ]
    real_send = batch_module._send

    def another_projector_first(db: Db, decider: Any) -> int:
        project(db, snapshot)  # its update of the turns finds none of them: not written yet
        return real_send(db, decider)

    monkeypatch.setattr(batch_module, "_send", another_projector_first)
    project_batch(db, turns)
    linked = {t["_id"]: t["snapshot_id"] for t in db[TURNS].find()}
    assert linked == {turn.event_id: snapshot.event_id for turn, _ in turns}


def test_a_stored_profile_set_by_several_turns_and_facts_in_one_batch_is_folded_and_exact(
    databases: tuple[Db, Db],
) -> None:
    """A field folded after another field's update, itself after an update of the same field:
    the fold's condition is what the field held just before, not what was fetched."""
    live, batch = databases

    def named(minute: int) -> Logged:
        at = T0 + timedelta(minutes=minute)
        turn = TurnRecorded(
            event_id=f"t{minute}",
            occurred_at=at,
            recorded_at=at,
            user_id="tim",
            session_id="s1",
            role="user",
            name=f"Tim{minute}",
            content="Hello.",
        )
        return (turn, 0)

    def located(minute: int) -> Logged:
        fact = MemoryAdded(
            event_id=f"e{minute}",
            occurred_at=T0 + timedelta(minutes=minute),
            memory_id=f"m{minute}",
            memory_type="semantic",
            user_id="tim",
            content=MemoryContent(
                subject="the user",
                owner="user",
                text=f"The user lives in place {minute}.",
                attributes={"profile_field": "location"},
            ),
            evidence=Evidence(source="sdk", observed_at=T0),
            provenance=None,
        )
        return (fact, 0)

    later = [named(1), located(2), named(3), named(4), located(5), located(6), named(7)]
    for db in (live, batch):
        project_batch(db, [named(0)])  # the profile is stored before the batch
    one_by_one(live, later)
    outcome = project_batch(batch, later)
    assert outcome.retries == 0 and outcome.fallbacks == 0
    assert read_model(batch)["profiles"] == read_model(live)["profiles"]
