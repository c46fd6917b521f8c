"""The layouts `bench.locomo.context_dates` asks the answer model about."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.locomo.context_dates import (
    as_built,
    main,
    past_first,
    questions_before,
    questions_of,
    reply_to,
    said_after,
    said_bracket,
)
from bench.locomo.dataset import Sample, Session, Turn

CONTEXT = [
    "## About the user",
    "- The user's name is Jon.",
    "## Facts",
    "- [20 January 2023] The user lost his job on 19 January 2023.",
    "## From earlier conversations",
    "- [20 January 2023] Jon: Lost my job as a banker yesterday.",
]


def test_as_built_is_the_context_unchanged() -> None:
    assert as_built(CONTEXT) == CONTEXT


def test_said_after_moves_only_the_memories_day_behind_their_text() -> None:
    laid_out = said_after(CONTEXT)
    assert laid_out[3] == "- The user lost his job on 19 January 2023. (said on 20 January 2023)"
    assert laid_out[5] == CONTEXT[5]  # a past message keeps its day in front
    assert laid_out[:3] == CONTEXT[:3]


def test_said_bracket_names_the_day_on_every_dated_line() -> None:
    laid_out = said_bracket(CONTEXT)
    assert laid_out[3] == "- [said on 20 January 2023] The user lost his job on 19 January 2023."
    assert laid_out[5] == "- [said on 20 January 2023] Jon: Lost my job as a banker yesterday."


def test_the_reported_conversation_is_refused() -> None:
    report = {"samples": [{"sample_id": "conv-26", "questions": []}]}
    with pytest.raises(SystemExit, match="reported conversation"):
        questions_of(report)


def test_only_questions_answered_from_build_context_are_asked_again() -> None:
    asked = {"question": "When?", "memstream": {"context": CONTEXT}}
    report = {"samples": [{"sample_id": "conv-30", "questions": [asked, {"question": "Who?"}]}]}
    assert questions_of(report) == [("conv-30", asked)]


def test_past_first_moves_the_past_messages_right_after_the_profile() -> None:
    assert past_first(CONTEXT) == [*CONTEXT[:2], *CONTEXT[4:], *CONTEXT[2:4]]


def test_past_first_puts_the_past_messages_first_without_a_profile() -> None:
    assert past_first(CONTEXT[2:]) == [*CONTEXT[4:], *CONTEXT[2:4]]


def _sample(*turns: Turn) -> Sample:
    session = Session(1, "1:56 pm on 20 January, 2023", datetime(2023, 1, 20, tzinfo=UTC), turns)
    return Sample("conv-30", "Jon", "Gina", (session,), ())


def test_a_reply_shows_the_last_sentence_of_the_question_it_answers() -> None:
    sample = _sample(
        Turn("Gina", "D1:1", "Oh no. So sorry! What happened to your job?"),
        Turn("Jon", "D1:2", "Lost my job as a banker yesterday."),
        Turn("Jon", "D1:3", "I'm starting a dance studio."),
        Turn("Gina", "D1:4", "Cool. Good luck!"),
    )
    questions = questions_before(sample)
    assert questions == {
        ("Jon", "Lost my job as a banker yesterday."): "Gina: What happened to your job?"
    }
    laid_out = reply_to(questions)(CONTEXT)
    assert laid_out[5] == (
        "- [20 January 2023] (Gina: What happened to your job?) "
        "Jon: Lost my job as a banker yesterday."
    )
    assert laid_out[:5] == CONTEXT[:5]  # a memory is never taken for a message


def test_a_chinese_question_is_the_last_sentence_without_a_space_before_it() -> None:
    sample = _sample(
        Turn("Gina", "D1:1", "太遗憾了。你的工作怎么了？"),
        Turn("Jon", "D1:2", "昨天丢了。"),
    )
    assert questions_before(sample) == {("Jon", "昨天丢了。"): "Gina: 你的工作怎么了？"}


def test_a_message_after_the_same_speakers_question_is_no_reply() -> None:
    sample = _sample(Turn("Jon", "D1:1", "Guess what?"), Turn("Jon", "D1:2", "I quit."))
    assert questions_before(sample) == {}


def test_an_unknown_layout_is_refused() -> None:
    with pytest.raises(SystemExit):
        main(["--data", "synthetic", "--report", "r.json", "--layouts", "as_built,upside_down"])
