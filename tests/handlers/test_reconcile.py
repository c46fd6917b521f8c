"""Reconciliation (ADD only for now): deterministic memory events from extracted memories."""

from __future__ import annotations

from datetime import datetime

import pytest

from events import Evidence, MemoryAdded, SnapshotPromoted, decode, derived_id, encode
from handlers.reconcile import additions
from tests.factories import CLOCK, at, content, snapshot

MEMORIES = [
    content(text="The user works at Stripe."),
    content(subject="John", text="John is a nurse in Berlin.", category="work"),
]
VECTORS = [[0.6, 0.8], [1.0, 0.0]]


def added(snap: SnapshotPromoted | None = None, now: datetime = CLOCK) -> list[MemoryAdded]:
    snap = snap or snapshot(agent_id="agent-1", occurred_at=at(30))
    return additions(snap, "semantic", MEMORIES, VECTORS, now=now)


def test_one_memory_added_per_memory() -> None:
    events = added()
    assert [e.content for e in events] == MEMORIES
    assert [e.embedding for e in events] == [(0.6, 0.8), (1.0, 0.0)]
    for event in events:
        assert event.version == 1
        assert event.memory_type == "semantic"
        assert (event.user_id, event.agent_id) == ("u1", "agent-1")
        assert event.occurred_at == CLOCK
        assert event.key == "u1"


def test_evidence_points_at_the_snapshot() -> None:
    snap = snapshot(seq=2, agent_id="agent-1", occurred_at=at(30))
    for event in added(snap=snap):
        assert event.evidence == Evidence(
            source="extraction",
            snapshot_id=snap.event_id,
            session_id="s1",
            observed_at=at(30),
        )


def test_ids_are_deterministic() -> None:
    first = added(now=CLOCK)
    again = added(now=at(3_600))  # a replay later on
    assert [e.memory_id for e in first] == [e.memory_id for e in again]
    assert [e.event_id for e in first] == [e.event_id for e in again]
    snap_id = snapshot().event_id
    assert first[0].memory_id == derived_id("memory", "semantic", snap_id, 0)
    assert first[0].event_id == derived_id("added", first[0].memory_id)


def test_ids_are_unique_per_snapshot_type_and_position() -> None:
    ids = {e.memory_id for e in added()}
    ids |= {e.memory_id for e in added(snap=snapshot(seq=1))}
    ids |= {e.memory_id for e in additions(snapshot(), "episodic", MEMORIES, VECTORS, now=CLOCK)}
    assert len(ids) == 6
    events = added()
    assert len({e.event_id for e in events} | {e.memory_id for e in events}) == 4


def test_events_round_trip_through_the_codec() -> None:
    for event in added():
        assert decode(encode(event)) == event


def test_no_memories_gives_no_events() -> None:
    assert additions(snapshot(), "semantic", [], [], now=CLOCK) == []


@pytest.mark.parametrize(("memories", "vectors"), [(2, 1), (1, 2), (0, 1), (2, 0)])
def test_memories_and_embeddings_must_match(memories: int, vectors: int) -> None:
    with pytest.raises(ValueError, match=f"{memories} memories but {vectors} embeddings"):
        additions(snapshot(), "semantic", MEMORIES[:memories], VECTORS[:vectors], now=CLOCK)
