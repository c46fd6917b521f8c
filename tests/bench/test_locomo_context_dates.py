"""The date layouts `bench.locomo.context_dates` asks the answer model about."""

from __future__ import annotations

import pytest

from bench.locomo.context_dates import as_built, questions_of, said_after, said_bracket

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
