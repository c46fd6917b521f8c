"""An extraction's result: one record with every decision, ids and times from the inputs."""

from __future__ import annotations

import pytest

from events import Evidence, MemoryAdded, SnapshotPromoted, decode, derived_id, encode
from events.codec import MAX_EVENT_BYTES
from handlers.extraction.base import ExtractionOutcome
from handlers.extraction.results import (
    already_extracted,
    extraction_result,
    memory_id_for,
    result_id,
    rounded,
)
from tests.factories import at, content, snapshot

MEMORIES = (
    content(text="The user works at Stripe."),
    content(subject="John", text="John is a nurse in Berlin.", category="work"),
)
VECTORS = [[0.6, 0.8], [1.0, 0.0]]


def result_of(snap: SnapshotPromoted | None = None, memories: tuple = MEMORIES) -> object:
    snap = snap or snapshot(agent_id="agent-1", occurred_at=at(30))
    return extraction_result(snap, "semantic", ExtractionOutcome(memories, 1), VECTORS)


def test_one_record_carries_an_add_per_memory() -> None:
    snap = snapshot(agent_id="agent-1", occurred_at=at(30))
    result = extraction_result(snap, "semantic", ExtractionOutcome(MEMORIES, 2), VECTORS)
    assert result.event_id == result_id(snap.event_id, "semantic")
    assert (result.snapshot_id, result.user_id, result.agent_id) == (snap.event_id, "u1", "agent-1")
    assert result.attempts == 2 and result.failure is None
    assert all(isinstance(d, MemoryAdded) for d in result.decisions)
    assert [d.content for d in result.decisions] == list(MEMORIES)
    assert [d.embedding for d in result.decisions] == [(0.6, 0.8), (1.0, 0.0)]
    assert result.memory_ids == tuple(d.memory_id for d in result.decisions)
    for decision in result.decisions:
        assert (decision.version, decision.memory_type, decision.agent_id) == (
            1,
            "semantic",
            "agent-1",
        )
        assert decision.evidence == Evidence(
            source="extraction", snapshot_id=snap.event_id, session_id="s1", observed_at=at(30)
        )


def test_every_time_in_the_result_is_the_snapshots_event_time() -> None:
    result = result_of()
    assert result.occurred_at == at(30)
    assert {d.occurred_at for d in result.decisions} == {at(30)}


def test_memory_ids_come_from_what_the_memory_says_not_its_position() -> None:
    snap = snapshot()
    forwards = extraction_result(snap, "semantic", ExtractionOutcome(MEMORIES, 1), VECTORS)
    backwards = extraction_result(
        snap, "semantic", ExtractionOutcome(MEMORIES[::-1], 1), VECTORS[::-1]
    )
    assert set(forwards.memory_ids) == set(backwards.memory_ids)
    first = forwards.decisions[0]
    assert first.memory_id == derived_id(
        "memory", "semantic", snap.event_id, "the user", "The user works at Stripe."
    )
    assert first.memory_id == memory_id_for(snap, "semantic", MEMORIES[0])
    assert first.event_id == derived_id("added", first.memory_id)


def test_ids_differ_per_snapshot_and_type() -> None:
    one, two = snapshot(), snapshot()
    ids = {memory_id_for(s, t, MEMORIES[0]) for s in (one, two) for t in ("semantic", "episodic")}
    assert len(ids) == 4


def test_a_failed_extraction_has_no_decisions_and_says_why() -> None:
    outcome = ExtractionOutcome((), 3, failure="invalid LLM output: not JSON")
    result = extraction_result(snapshot(), "semantic", outcome, [])
    assert result.decisions == () and result.memory_ids == ()
    assert result.failure == "invalid LLM output: not JSON"


def test_a_result_too_large_for_one_record_is_a_failure() -> None:
    many = tuple(content(text=f"The user knows fact number {i}.") for i in range(40))
    wide = [[0.123456789] * 3_072 for _ in many]
    result = extraction_result(snapshot(), "semantic", ExtractionOutcome(many, 1), wide)
    assert result.decisions == ()
    assert result.failure is not None and "too large for one record (40 memories)" in result.failure
    assert len(encode(result)) < MAX_EVENT_BYTES


def test_embeddings_keep_float32_precision() -> None:
    assert rounded([0.123456789, -1e-9, 1.0]) == (0.1234568, -1e-9, 1.0)


def test_the_result_round_trips_through_the_codec() -> None:
    result = result_of()
    assert decode(encode(result)) == result  # type: ignore[arg-type]


def test_memories_and_embeddings_must_match() -> None:
    with pytest.raises(ValueError, match="2 memories but 1 embeddings"):
        extraction_result(snapshot(), "semantic", ExtractionOutcome(MEMORIES, 1), VECTORS[:1])


@pytest.mark.parametrize(
    ("last", "seq", "done"), [(None, 0, False), (0, 0, True), (0, 1, False), (3, 2, True)]
)
def test_already_extracted_by_the_sessions_last_seq(last: int | None, seq: int, done: bool) -> None:
    seqs = {} if last is None else {"s1": last}
    assert already_extracted(seqs, snapshot(seq=seq)) is done
    assert not already_extracted({"other": 9}, snapshot(seq=seq))
