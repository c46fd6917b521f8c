"""The redrive rules: ids, headers, which letters may be redriven, whole payloads."""

from __future__ import annotations

import hashlib

import pytest

from handlers.dead_letters import (
    Letter,
    PayloadIncomplete,
    Redrive,
    applies_to,
    choose,
    counts_by_reason,
    dead_letter_id,
    matches_original,
    original_value,
    redrive_id,
    redrive_of,
)


def letter(letter_id: str = "d1", **changes: object) -> Letter:
    fields: dict[str, object] = {
        "letter_id": letter_id,
        "stage": "window",
        "source_topic": "memstream.turns",
        "source_partition": 0,
        "redrives": 0,
        "redrive_of": None,
    }
    fields.update(changes)
    return Letter(**fields)  # type: ignore[arg-type]


def test_redrive_headers_round_trip_and_address_one_stage() -> None:
    redrive = Redrive("r1", "d1", "extract-semantic")
    assert redrive_of(redrive.headers()) == redrive
    assert redrive_of([("other", b"x")]) is None and redrive_of(None) is None
    assert redrive_of(redrive.headers()[:2]) is None  # all three parts or it is no redrive
    assert applies_to(None, "window")
    assert applies_to(redrive, "extract-semantic") and not applies_to(redrive, "extract-episodic")


def test_a_dead_letter_id_is_the_content_and_a_redrive_gives_a_new_one() -> None:
    first = dead_letter_id("window", "t", b"k", b"v", None)
    assert first == dead_letter_id("window", "t", b"k", b"v", None)  # re-read after a crash
    assert first != dead_letter_id("window", "t", b"k", b"w", None)
    assert first != dead_letter_id("extract-semantic", "t", b"k", b"v", None)
    again = dead_letter_id("window", "t", b"k", b"v", Redrive("r1", first, "window"))
    assert again != first
    assert again != dead_letter_id("window", "t", b"k", b"v", Redrive("r2", first, "window"))


def test_redrive_ids_count_earlier_redrives() -> None:
    assert redrive_id("d1", 0) == redrive_id("d1", 0)  # two operators at once: one redrive
    assert redrive_id("d1", 0) != redrive_id("d1", 1) != redrive_id("d2", 1)


def test_a_letter_is_redriven_once_unless_forced() -> None:
    done = letter(redrives=1)
    assert choose([done], every=False, force=False).chosen == ()
    (why,) = [reason for _, reason in choose([done], every=False, force=False).skipped]
    assert "already redriven" in why
    assert choose([done], every=False, force=True).chosen == (done,)


def test_all_skips_failed_redrives_so_poison_does_not_loop() -> None:
    fresh, again = letter("d1"), letter("d2", redrive_of="d1")
    assert choose([fresh, again], every=True, force=False).chosen == (fresh,)
    assert choose([again], every=False, force=False).chosen == (again,)  # by id it goes
    assert choose([fresh, again], every=True, force=True).chosen == (fresh, again)


def test_a_letter_without_a_source_cannot_be_redriven() -> None:
    choice = choose([letter(source_topic=None)], every=True, force=True)
    assert choice.chosen == () and "no source" in choice.skipped[0][1]


def test_the_payload_is_used_only_when_it_is_the_whole_record() -> None:
    raw = b'{"event_id": "t1"}'
    whole = {
        "_id": "d1",
        "payload": raw.decode(),
        "payload_sha256": hashlib.sha256(raw).hexdigest(),
    }
    assert original_value(whole) == raw
    cut = {**whole, "payload": raw.decode()[:5]}
    with pytest.raises(PayloadIncomplete):
        original_value(cut)
    assert matches_original(cut, raw) and not matches_original(cut, raw[:5])
    assert original_value({"_id": "old", "payload": "x"}) == b"x"  # before hashes: on trust


def test_counts_group_by_stage_and_reason_kind() -> None:
    docs = [
        {"stage": "window", "reason": "not JSON: unexpected character"},
        {"stage": "window", "reason": "not JSON: eof"},
        {"stage": "extract-semantic", "reason": "invalid LLM output: x"},
    ]
    assert counts_by_reason(docs) == {
        ("window", "not JSON"): 2,
        ("extract-semantic", "invalid LLM output"): 1,
    }
