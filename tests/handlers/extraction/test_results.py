"""Result records: one per snapshot (or save) and type, ids and times from the inputs."""

from __future__ import annotations

import pytest

from events import Evidence, LLMUsage, decode, encode
from events.codec import MAX_EVENT_BYTES
from handlers.extraction.base import ExtractionOutcome
from handlers.extraction.results import (
    already_extracted,
    extraction_record,
    result_id,
    save_record,
    save_result_id,
    save_source,
    snapshot_source,
    usage_of,
)
from handlers.ports import ChatAnswer
from tests import factories as f
from tests.factories import at, snapshot


def test_a_snapshot_source_carries_its_evidence_and_event_time() -> None:
    snap = snapshot(agent_id="agent-1", occurred_at=at(30))
    source = snapshot_source(snap)
    assert (source.source_id, source.user_id, source.agent_id) == (snap.event_id, "u1", "agent-1")
    assert source.occurred_at == at(30)
    assert source.evidence == Evidence(
        source="extraction", snapshot_id=snap.event_id, session_id="s1", observed_at=at(30)
    )


def test_a_save_source_is_the_sdk_at_the_request_time() -> None:
    request = f.save_request(occurred_at=at(7), session_id="s9", agent_id="a")
    source = save_source(request)
    assert (source.source_id, source.agent_id, source.occurred_at) == (request.event_id, "a", at(7))
    assert source.evidence == Evidence(source="sdk", session_id="s9", observed_at=at(7))


def test_an_extraction_record_carries_its_decisions_and_cost() -> None:
    snap = snapshot(occurred_at=at(30))
    record = f.extracted(snap, f.content(), attempts=2)
    assert record.event_id == result_id(snap.event_id, "semantic")
    assert record.occurred_at == at(30)
    assert record.attempts == 2 and record.failure is None
    assert record.usage == LLMUsage(calls=2, prompt_tokens=200, completion_tokens=40)
    assert record.memory_ids == tuple(d.memory_id for d in record.decisions)
    assert decode(encode(record)) == record


def test_a_record_too_large_for_the_log_is_a_failure_without_decisions() -> None:
    many = [f.content(text=f"The user knows fact number {i}.") for i in range(40)]
    wide = [f.memory_added(content=c, embedding=tuple([0.123456789] * 3_072)) for c in many]
    snap = snapshot()
    record = extraction_record(
        snap, "semantic", ExtractionOutcome(tuple(many), 1), wide, LLMUsage()
    )
    assert record.decisions == ()
    assert record.failure is not None and "too large for one record (40 memories)" in record.failure
    assert len(encode(record)) < MAX_EVENT_BYTES


def test_decisions_sharing_an_event_id_are_a_failure_without_decisions() -> None:
    twice = f.memory_reinforced(memory_id="m1")
    other = f.memory_added()
    snap = snapshot()
    record = extraction_record(
        snap, "semantic", ExtractionOutcome((), 1), [other, twice, twice], LLMUsage()
    )
    assert record.decisions == ()
    assert record.failure == f"decision id collision: {twice.event_id} decided more than once"


def test_a_save_record_has_one_id_per_save_and_type() -> None:
    request = f.save_request()
    record = save_record(request, [f.memory_added()], LLMUsage())
    assert record.event_id == save_result_id(request.event_id, "semantic")
    assert record.save_id == request.event_id
    assert save_result_id(request.event_id, "episodic") != record.event_id


def test_usage_adds_up_the_answers() -> None:
    answers = [ChatAnswer("{}", "m", 100, 10), ChatAnswer("{}", "m", 50, 5)]
    assert usage_of(answers) == LLMUsage(calls=2, prompt_tokens=150, completion_tokens=15)
    assert usage_of([]) == LLMUsage()


@pytest.mark.parametrize(
    ("last", "seq", "done"), [(None, 0, False), (0, 0, True), (0, 1, False), (3, 2, True)]
)
def test_already_extracted_by_the_sessions_last_seq(last: int | None, seq: int, done: bool) -> None:
    seqs = {} if last is None else {"s1": last}
    assert already_extracted(seqs, snapshot(seq=seq)) is done
    assert not already_extracted({"other": 9}, snapshot(seq=seq))
