"""One validation per topic, shared by every stage that reads it."""

from __future__ import annotations

import re

import orjson
import pytest

from events import encode
from handlers.inputs import (
    InvalidRecord,
    read_result_record,
    read_snapshots_record,
    read_turns_record,
)
from tests import factories as f


@pytest.mark.parametrize("command", [f.turn(), f.flush(), f.idle()], ids=lambda c: c.event_type)
def test_a_turns_record_keyed_by_its_session_is_read(command: object) -> None:
    assert read_turns_record(b"u1|s1", encode(command)) == command  # type: ignore[arg-type]


def test_a_turns_record_whose_key_disagrees_with_its_payload_is_refused() -> None:
    with pytest.raises(InvalidRecord, match=re.escape("record key b'u1|other' is not 'u1|s1'")):
        read_turns_record(b"u1|other", encode(f.turn()))


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "no value"),
        (b"not json", "not JSON"),
        (orjson.dumps({"event_type": "TurnRecorded"}), "invalid event"),
        (encode(f.snapshot()), "SnapshotPromoted does not belong on the turns topic"),
    ],
)
def test_a_turns_record_that_is_not_a_turn_or_command_is_refused(
    value: bytes | None, reason: str
) -> None:
    with pytest.raises(InvalidRecord, match=reason):
        read_turns_record(b"u1|s1", value)


def test_snapshots_and_save_requests_keyed_by_their_user_are_read() -> None:
    snapshot, save = f.snapshot(), f.save_request()
    assert read_snapshots_record(b"u1", encode(snapshot)) == snapshot
    assert read_snapshots_record(b"u1", encode(save)) == save
    with pytest.raises(InvalidRecord, match="record key"):
        read_snapshots_record(b"u1|s1", encode(snapshot))
    with pytest.raises(InvalidRecord, match="does not belong on the snapshots topic"):
        read_snapshots_record(b"u1|s1", encode(f.turn()))


def test_only_result_records_are_read_as_results() -> None:
    result = f.extracted(f.snapshot(), f.content())
    assert read_result_record(b"u1", encode(result)) == result
    assert read_result_record(b"u1", encode(f.memory_added())) is None
    with pytest.raises(InvalidRecord):
        read_result_record(b"u1", b"{}")


def test_a_turn_recorded_by_a_service_account_for_another_user_is_refused() -> None:
    account = f.principal("service_account", "sa-1")
    own = f.turn(user_id="sa-1", principal=account)
    assert read_turns_record(b"sa-1|s1", encode(own)) == own
    with pytest.raises(InvalidRecord, match="cannot record for user 'u1'"):
        read_turns_record(b"u1|s1", encode(f.turn(principal=account)))


def test_a_save_requested_by_a_service_account_for_another_user_is_refused() -> None:
    account = f.principal("service_account", "sa-1")
    with pytest.raises(InvalidRecord, match="cannot record for user 'u1'"):
        read_snapshots_record(b"u1", encode(f.save_request(principal=account)))


def test_forget_requests_are_read_on_the_topic_and_key_of_what_they_forget() -> None:
    session, memory = f.session_forgotten(), f.memory_forgotten()
    user_copy, saves_copy = f.user_forgotten(turns_partition=2), f.user_forgotten()
    assert read_turns_record(b"u1|s1", encode(session)) == session
    assert read_turns_record(b"u1", encode(user_copy)) == user_copy
    assert read_snapshots_record(b"u1", encode(memory)) == memory
    assert read_snapshots_record(b"u1", encode(saves_copy)) == saves_copy


def test_a_users_forget_copy_names_its_partition_on_the_turns_topic_only() -> None:
    with pytest.raises(InvalidRecord, match="names its turns_partition"):
        read_turns_record(b"u1", encode(f.user_forgotten()))
    with pytest.raises(InvalidRecord, match="has no turns_partition"):
        read_snapshots_record(b"u1", encode(f.user_forgotten(turns_partition=0)))
    with pytest.raises(InvalidRecord, match="does not belong on the turns topic"):
        read_turns_record(b"u1", encode(f.memory_forgotten()))
