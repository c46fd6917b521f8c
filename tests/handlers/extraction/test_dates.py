"""Time grounding: the date the extractors are told, and relative times rewritten as dates
against the day they were said."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from events.snapshots import SnapshotPromoted
from handlers.extraction.dates import (
    date_instruction,
    dates_in,
    ground_relative_times,
    said_on,
    without_dates,
)
from tests.factories import snapshot

MONDAY = date(2023, 5, 8)
ONE_DAY = [(MONDAY, "I went to a support group yesterday.")]


@pytest.mark.parametrize(
    ("written", "grounded"),
    [
        (
            "The user went to a support group yesterday.",
            "The user went to a support group on 7 May 2023.",
        ),
        ("Yesterday, the user met a mentor.", "On 7 May 2023, the user met a mentor."),
        ("The user ran a race last Saturday.", "The user ran a race on Saturday, 6 May 2023."),
        ("The user ran a race on last Saturday.", "The user ran a race on Saturday, 6 May 2023."),
        ("The user gave a talk last week.", "The user gave a talk the week before 8 May 2023."),
        ("The user flies to Oslo tomorrow.", "The user flies to Oslo on 9 May 2023."),
        ("The user has an exam next Monday.", "The user has an exam on Monday, 15 May 2023."),
        ("The user moved to Rome last year.", "The user moved to Rome in 2022."),
        ("The user started three years ago.", "The user started in 2020."),
        ("The user got a dog 2 weeks ago.", "The user got a dog 2 weeks before 8 May 2023."),
        ("The user visits Rome next month.", "The user visits Rome in June 2023."),
        ("The user may move to Rome.", "The user may move to Rome."),
        ("用户昨天去了图书馆。", "用户2023年5月7日去了图书馆。"),
        ("用户去年搬到了上海。", "用户2022年搬到了上海。"),
    ],
)
def test_relative_times_become_dates_of_the_day_they_were_said(written: str, grounded: str) -> None:
    assert ground_relative_times(written, ONE_DAY).text == grounded


def test_last_month_in_january_is_december_of_the_year_before() -> None:
    grounded = ground_relative_times("The user quit last month.", [(date(2024, 1, 3), "x")])
    assert grounded.text == "The user quit in December 2023."
    assert grounded.dates == ("December 2023",)


def test_over_several_days_a_relative_time_is_read_against_the_latest_turn_saying_it() -> None:
    turns = [
        (date(2023, 5, 8), "I fell ill yesterday."),
        (date(2023, 5, 20), "Better now. Yesterday I went hiking."),
    ]
    assert said_on("yesterday", turns) == date(2023, 5, 20)
    assert said_on("last week", turns) is None
    # An expression no turn says is left as it is, not guessed.
    text = "The user went hiking yesterday and moves next week."
    assert ground_relative_times(text, turns).text == (
        "The user went hiking on 19 May 2023 and moves next week."
    )


def test_nothing_to_ground_without_turns() -> None:
    assert ground_relative_times("yesterday", []).text == "yesterday"


def dated(*days: datetime) -> SnapshotPromoted:
    return snapshot([{"content": "hi", "occurred_at": day} for day in days])


def test_the_extractors_are_told_the_conversations_date_from_its_turns() -> None:
    one_day = dated(datetime(2023, 5, 8, 13, 56, tzinfo=UTC))
    assert date_instruction(one_day, "en").startswith(
        "The conversation took place on Monday, 8 May 2023."
    )
    assert '"yesterday" as "on 7 May 2023"' in date_instruction(one_day, "en")
    assert date_instruction(one_day, "zh").startswith("对话日期：2023年5月8日（星期一）")
    spanning = dated(
        datetime(2023, 5, 8, 23, 0, tzinfo=UTC), datetime(2023, 5, 9, 1, 0, tzinfo=UTC)
    )
    assert "between 8 May 2023 and 9 May 2023" in date_instruction(spanning, "en")


def test_dates_are_found_and_left_out_for_the_grounding_checks() -> None:
    text = "The user went to a concert on Saturday, 6 May 2023 and may go again in 2024."
    assert dates_in(text) == ["Saturday, 6 May 2023", "2024"]
    assert "may go again" in without_dates(text)
    assert "2023" not in without_dates(text) and "Saturday" not in without_dates(text)
