"""The batch executor against the live one: random logs (tests/support/projection_log.py)
projected in random batches by `project_batch` and record by record by `project` end in the
same database, document for document, with the same error for the same records."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.database import Database

from projections import ensure_indexes, project, project_batch
from projections.batch import BatchOutcome
from tests.support.projection_log import Logged, random_log

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
    """The log in batches of random sizes; the errors, and how many runs fell back."""
    errors: list[str | None] = []
    fallbacks = 0
    start = 0
    while start < len(log):
        size = rng.choice((1, 2, 5, 17, 40, 200))
        outcome: BatchOutcome = project_batch(db, log[start : start + size])
        errors.extend(None if e is None else repr(e) for e in outcome.errors)
        fallbacks += outcome.fallbacks
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
    assert fallbacks == 0  # every run was decided in bulk, none projected record by record
    assert any(expected)  # the log did collide somewhere: the test saw the error path


def test_the_random_logs_hold_every_kind_of_record_and_collision() -> None:
    kinds = {type(event).__name__ for seed in SEEDS for event, _ in random_log(seed, 120)}
    assert kinds >= {
        "TurnRecorded",
        "SnapshotPromoted",
        "SnapshotExtracted",
        "MemorySaved",
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
