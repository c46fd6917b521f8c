"""Projecting dead letters, their redrives, and a redriven extraction replacing a failed one."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pymongo import MongoClient

from events import SnapshotExtracted
from events.codec import AnyEvent
from projections import ensure_indexes, project, project_batch
from tests import factories as f
from tests.projections.test_projections import (
    Db,
    content,
    db,  # noqa: F401  (the fixture)
    read_model,
    snapshot_of,
    turn_event,
)

pytestmark = pytest.mark.integration


def failed_and_redriven() -> tuple[Any, SnapshotExtracted, SnapshotExtracted]:
    snapshot = snapshot_of(turn_event("t1", "I work at Stripe."))
    failed = f.extracted(snapshot, failure="invalid LLM output: not valid JSON", attempts=3)
    redriven = f.extracted(snapshot, content("The user works at Stripe."), redrive_id="r1")
    return snapshot, failed, redriven


def test_a_redriven_extraction_replaces_the_failed_one(db: Db) -> None:  # noqa: F811
    snapshot, failed, redriven = failed_and_redriven()
    assert redriven.event_id != failed.event_id  # a redrive gets its own result id
    for event in (snapshot, failed, redriven, failed, redriven):  # with redeliveries
        project(db, event)
    record = db["snapshots"].find_one({"_id": snapshot.event_id})["extractions"]["semantic"]
    assert record["failure"] is None and record["redrive_id"] == "r1"
    assert [m["text"] for m in db["memories"].find()] == ["The user works at Stripe."]


def test_a_redrive_never_replaces_a_result_that_succeeded(db: Db) -> None:  # noqa: F811
    snapshot = snapshot_of(turn_event("t1", "I work at Stripe."))
    first = f.extracted(snapshot, content("The user works at Stripe."))
    later = f.extracted(snapshot, content("The user is in payments."), redrive_id="r1")
    for event in (snapshot, first, later):
        project(db, event)
    assert [m["text"] for m in db["memories"].find()] == ["The user works at Stripe."]


def test_a_redrive_is_noted_on_its_letter_once_whatever_the_order(db: Db) -> None:  # noqa: F811
    letter = f.dead_letter(event_id="dead-1")
    note = f.redrive(dead_letter_id="dead-1", event_id="redrive-1")
    for event in (note, letter, note, letter):  # the redrive may be projected first
        project(db, event)
    (document,) = db["dead_letters"].find()
    assert document["stage"] == "decode" and document["reason"] == "not JSON"
    assert [entry["event_id"] for entry in document["redrives"]] == ["redrive-1"]


def test_redrives_projected_in_batches_equal_the_live_model(db: Db, mongo: Any) -> None:  # noqa: F811
    snapshot, failed, redriven = failed_and_redriven()
    events: list[AnyEvent] = [
        turn_event("t1", "I work at Stripe."),
        snapshot,
        failed,
        redriven,
        f.dead_letter(event_id="dead-1"),
        f.redrive(dead_letter_id="dead-1", event_id="redrive-1"),
    ]
    for event in events:
        project(db, event)
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    rebuilt = client[f"bulk_{uuid.uuid4().hex[:10]}"]
    try:
        ensure_indexes(rebuilt)
        for start in range(0, len(events), 2):
            outcome = project_batch(rebuilt, [(event, None) for event in events[start : start + 2]])
            assert outcome.errors == [None] * len(outcome.errors)
        assert read_model(rebuilt) == read_model(db)
        assert rebuilt["dead_letters"].find_one()["redrives"][0]["event_id"] == "redrive-1"
    finally:
        client.drop_database(rebuilt.name)
        client.close()
