"""The result types' JSON decoding: the HTTP client's results carry the same types as the
in-process clients' (times as `datetime`), keys the types do not declare kept."""

from __future__ import annotations

from datetime import UTC, datetime

from memstream.sdk.results import ErasureReceipt, Memory, MemoryVersion, Profile, from_json

AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def memory_json() -> dict[str, object]:
    return {
        "_id": "m1:1",
        "memory_id": "m1",
        "text": "The user lives in Porto.",
        "created_at": "2026-12-01T09:30:00+00:00",
        "updated_at": "2026-12-01T09:30:00Z",
        "expires_at": None,
        "superseded_by": {"version": 2, "at": "2026-12-01T09:30:00+00:00", "text": "x"},
        "evidence": [{"event_id": "e1", "observed_at": "2026-12-01T09:30:00+00:00"}],
        "attributes": {"since": "2026-12-01T09:30:00+00:00"},
        "a_field_from_a_newer_server": "kept",
    }


def test_times_a_memory_declares_are_parsed_at_every_depth_and_nothing_else() -> None:
    memory = from_json(memory_json(), Memory)
    assert memory["created_at"] == AT and memory["updated_at"] == AT
    assert memory["expires_at"] is None
    assert memory["superseded_by"]["at"] == AT
    assert memory["evidence"][0]["observed_at"] == AT
    assert memory["attributes"] == {"since": "2026-12-01T09:30:00+00:00"}  # free-form: as sent
    assert memory["a_field_from_a_newer_server"] == "kept"
    assert memory["text"] == "The user lives in Porto."


def test_lists_optionals_and_nested_log_entries_are_decoded() -> None:
    version = {**memory_json(), "created_by": {"occurred_at": "2026-12-01T09:30:00Z"}}
    (decoded,) = from_json([version], list[MemoryVersion])
    assert decoded["created_by"]["occurred_at"] == AT
    assert from_json(None, Profile | None) is None
    profile = from_json({"_id": "u", "fields": {"city": {"at": "2026-12-01T09:30:00Z"}}}, Profile)
    assert profile["fields"]["city"]["at"] == AT


def test_a_receipt_keeps_its_counts_and_parses_its_request_time() -> None:
    receipt = from_json(
        {"request_id": "r1", "requested_at": "2026-12-01T09:30:00Z", "seen_steps": {"turns": 2}},
        ErasureReceipt,
    )
    assert receipt["requested_at"] == AT and receipt["seen_steps"] == {"turns": 2}


def test_keys_marked_not_required_are_optional_and_the_rest_required() -> None:
    assert {"expires_at", "fingerprint"} == Memory.__optional_keys__
    assert {"memory_id", "text", "created_at"} <= Memory.__required_keys__
    assert {"session_id", "memory_id", "memory_type", "steps"} <= ErasureReceipt.__optional_keys__
    assert {"request_id", "kind", "user_id", "complete"} <= ErasureReceipt.__required_keys__
