"""Reading the LoCoMo format: sessions in order with their dates, turns with photo captions,
QA with the adversarial category kept apart, and errors that say what is wrong."""

from __future__ import annotations

import copy
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench.locomo.dataset import (
    SYNTHETIC,
    LocomoFormatError,
    first_sessions,
    load,
    parse_date_time,
    parse_sample,
)
from bench.locomo.pipeline import session_id, session_messages


def raw_sample() -> dict[str, Any]:
    return copy.deepcopy(json.loads(SYNTHETIC.read_text())[0])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
        ("12:30 pm on 1 January 2024", datetime(2024, 1, 1, 12, 30, tzinfo=UTC)),
        ("10:37 AM on 27 june, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
    ],
)
def test_session_dates_are_read_as_utc(text: str, expected: datetime) -> None:
    assert parse_date_time(text) == expected


@pytest.mark.parametrize("text", ["8 May 2023", "1:56 pm on 8 Mai, 2023", ""])
def test_unreadable_session_dates_are_refused(text: str) -> None:
    with pytest.raises(LocomoFormatError):
        parse_date_time(text)


def test_synthetic_sample_follows_the_format() -> None:
    (sample,) = load(SYNTHETIC)
    assert (sample.speaker_a, sample.speaker_b) == ("Maya", "Jonas")
    assert [s.number for s in sample.sessions] == [1, 2, 3]
    assert sample.sessions[2].at == datetime(2024, 4, 2, 18, 45, tzinfo=UTC)
    assert {qa.category for qa in sample.qa} == {1, 2, 3, 4, 5}
    assert all(sample.session_of(e) for qa in sample.qa for e in qa.evidence)
    assert set(sample.extra) == {"observation", "session_summary", "event_summary"}


def test_sessions_are_ordered_by_number_not_by_key_order() -> None:
    data = raw_sample()
    conversation = data["conversation"]
    data["conversation"] = {
        key: conversation[key]
        for key in sorted(conversation, key=lambda k: k.startswith("session_1"), reverse=False)
    }
    data["conversation"]["session_10"] = [{"speaker": "Maya", "dia_id": "D10:1", "text": "Later."}]
    data["conversation"]["session_10_date_time"] = "1:00 pm on 1 May, 2024"
    assert [s.number for s in parse_sample(data).sessions] == [1, 2, 3, 10]


def test_adversarial_questions_keep_their_adversarial_answer() -> None:
    (sample,) = load(SYNTHETIC)
    adversarial = [qa for qa in sample.qa if qa.adversarial]
    assert [qa.adversarial_answer for qa in adversarial] == ["Pepper", "Madrid"]
    assert all(qa.answer == "" for qa in adversarial)


def test_numeric_answers_are_read_as_text() -> None:
    data = raw_sample()
    data["qa"][0]["answer"] = 2022
    assert parse_sample(data).qa[0].answer == "2022"


def test_photo_captions_are_part_of_what_was_said() -> None:
    (sample,) = load(SYNTHETIC)
    turn = sample.sessions[0].turns[5]
    assert turn.content.endswith("[shares a photo of a blue ceramic bowl on a wooden table]")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["conversation"].pop("session_2_date_time"), "session_2 without"),
        (lambda d: d["conversation"]["session_1"][0].update(speaker="Zoe"), "'Zoe' is neither"),
        (lambda d: d["conversation"]["session_2"][0].update(dia_id="D1:1"), "dia_id appears twice"),
        (lambda d: d["qa"][0].pop("answer"), "needs 'answer'"),
        (lambda d: d.pop("sample_id"), "sample_id"),
        (lambda d: d["conversation"].pop("speaker_b"), "speaker_b"),
    ],
)
def test_malformed_samples_are_refused_with_the_reason(change: Any, message: str) -> None:
    data = raw_sample()
    change(data)
    with pytest.raises(LocomoFormatError, match=message):
        parse_sample(data)


def test_a_file_of_one_nested_sample_is_read_as_that_sample(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps(raw_sample()))
    (sample,) = load(path)
    assert sample == load(SYNTHETIC)[0]


def test_a_file_that_is_neither_samples_nor_a_conversation_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps("conv-26"))
    with pytest.raises(LocomoFormatError, match="list of samples or one conversation"):
        load(path)


def flat(data: dict[str, Any]) -> dict[str, Any]:
    """A nested sample in the layout of the repository's zip: the conversation's keys at the
    top, ``qa`` and the per-session summaries beside them, no ``sample_id``."""
    flat = {**data["conversation"], "qa": data["qa"]}
    for name in ("observation", "session_summary", "event_summary"):
        flat.update(data.get(name) or {})
    return flat


def test_the_repositorys_zip_of_one_conversation_per_file_is_read(tmp_path: Path) -> None:
    nested = raw_sample()
    archive = tmp_path / "locomo10.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        second = flat(raw_sample())
        zipped.writestr("data/multimodal_dialog/locomo10_v2/30.json", json.dumps(second))
        zipped.writestr("data/multimodal_dialog/locomo10_v2/26.json", json.dumps(flat(nested)))
    first, other = load(archive)
    # Named after its file, in conversation order; the same conversation as the nested layout.
    assert (first.sample_id, other.sample_id) == ("conv-26", "conv-30")
    expected = load(SYNTHETIC)[0]
    assert (first.sessions, first.qa) == (expected.sessions, expected.qa)
    assert first.extra["observation"] == nested["observation"]


def test_first_sessions_keep_only_questions_whose_evidence_lies_in_them() -> None:
    (sample,) = load(SYNTHETIC)
    cut = first_sessions(sample, 2)
    assert [s.number for s in cut.sessions] == [1, 2]
    kept = {turn.dia_id for s in cut.sessions for turn in s.turns}
    assert cut.qa and all(qa.evidence and set(qa.evidence) <= kept for qa in cut.qa)
    dropped = [qa for qa in sample.qa if qa not in cut.qa]
    assert dropped and all(not set(qa.evidence) <= kept or not qa.evidence for qa in dropped)
    assert first_sessions(sample, 0) == sample == first_sessions(sample, 9)


def test_speaker_a_is_the_user_and_speaker_b_another_named_human() -> None:
    (sample,) = load(SYNTHETIC)
    messages = session_messages(sample, sample.sessions[0])
    assert messages[0] == {
        "role": "user",
        "name": "Maya",
        "content": sample.sessions[0].turns[0].text,
    }
    assert messages[1]["role"] == "assistant" and messages[1]["name"] == "Jonas"
    assert session_id(sample, sample.sessions[1]) == "synthetic-1-session-2"
