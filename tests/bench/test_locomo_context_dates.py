"""The layouts `bench.locomo.context_dates` asks the answer model about."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from bench.locomo.context_dates import (
    as_built,
    day_of,
    layouts_for,
    main,
    memories_shown,
    past_first,
    questions_before,
    questions_of,
    reply_to,
    said_after,
    said_bracket,
)
from bench.locomo.dataset import Sample, Session, Turn
from handlers.context import ContextMemory

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


def test_the_shown_memories_are_read_back_with_their_types_days_and_the_profile() -> None:
    language, profile, memories = memories_shown(CONTEXT)
    assert language == "en"
    assert profile == {"name": "Jon"}
    assert memories == [ContextMemory("semantic", "The user lost his job on 19 January 2023.",
                                      date(2023, 1, 20))]  # fmt: skip


def test_a_chinese_context_is_read_back_with_its_days() -> None:
    lines = ["## 关于用户", "- 用户名叫小雨", "## 事实", "- [2023年1月20日] 用户丢了工作。"]
    language, profile, memories = memories_shown(lines)
    assert (language, profile) == ("zh", {"name": "小雨"})
    assert memories == [ContextMemory("semantic", "用户丢了工作。", date(2023, 1, 20))]


def test_a_bracket_that_is_no_day_stays_in_the_memorys_text() -> None:
    assert day_of("Monday") is None and day_of("31 Smarch 2023") is None
    _, _, memories = memories_shown(["## Facts", "- [draft] The user likes tea."])
    assert memories == [ContextMemory("semantic", "[draft] The user likes tea.", None)]


def _jon_and_gina() -> Sample:
    return _sample(
        Turn("Gina", "D1:1", "What happened to your job?"),
        Turn("Jon", "D1:2", "Lost my job as a banker yesterday."),
        Turn("Jon", "D1:3", "I'm starting a dance studio."),
        Turn("Gina", "D1:4", "Cool. Good luck!"),
    )


def test_rebuilt_makes_the_context_again_with_past_messages_recalled_for_the_question() -> None:
    layout = layouts_for(_jon_and_gina(), max_chars=2_400)["rebuilt"]
    built = layout(CONTEXT[:4], "What is Jon starting, a dance studio?")
    assert built[:4] == CONTEXT[:4]
    assert built[4:6] == [
        "## From earlier conversations",
        "- [20 January 2023] Jon: I'm starting a dance studio.",
    ]


def test_fewer_memories_keeps_three_of_each_type_and_offers_eight_past_messages() -> None:
    facts = [f"- [20 January 2023] The user owns {n} cats." for n in range(1, 6)]
    turns = [Turn("Jon", f"D1:{n}", f"My cat number {n} sleeps all day.") for n in range(1, 11)]
    layout = layouts_for(_sample(*turns), max_chars=4_000)["fewer_memories"]
    built = layout(["## Facts", *facts], "Which cat sleeps all day?")
    assert built[1:4] == facts[:3]
    assert built[4] == "## From earlier conversations"
    assert len(built[5:]) == 8


def test_rebuilt_keeps_within_the_runs_budget() -> None:
    facts = [f"- [20 January 2023] The user owns {n} cats and a long fact." for n in range(5)]
    layout = layouts_for(_jon_and_gina(), max_chars=120)["rebuilt"]
    assert len("\n\n".join(layout(["## Facts", *facts], "Jon's job?"))) <= 120


def test_the_reported_conversation_is_asked_about_only_to_measure() -> None:
    asked = {"question": "When?", "memstream": {"context": CONTEXT}}
    report = {"samples": [{"sample_id": "conv-26", "questions": [asked]}]}
    assert questions_of(report, reported=True) == [("conv-26", asked)]


def test_named_writes_the_users_name_where_a_memory_says_the_user() -> None:
    facts = [
        "- [20 January 2023] The user and Gina talked about the user's job.",
        "- [20 January 2023] The users of the app liked it.",
    ]
    layout = layouts_for(_jon_and_gina(), max_chars=2_400)["named"]
    built = layout([*CONTEXT[:2], "## Facts", *facts], "Who talked about a job?")
    assert built[3:5] == [
        "- [20 January 2023] Jon and Gina talked about Jon's job.",
        "- [20 January 2023] The users of the app liked it.",
    ]


def test_past_only_shows_the_profile_and_past_messages_without_memories() -> None:
    layout = layouts_for(_jon_and_gina(), max_chars=2_400)["past_only"]
    built = layout(CONTEXT[:4], "What is Jon starting, a dance studio?")
    assert built[:2] == CONTEXT[:2]
    assert "## Facts" not in built
    assert built[2] == "## From earlier conversations"
