"""Time grounding: the conversation's date for the extractors, and relative times made absolute.

A memory outlives the conversation it came from: "The user went to a support group yesterday"
is wrong the day after it is written. The extractors therefore see the date the conversation
took place — the event time of its turns, carried in the log, so a replay shows the same date —
and are asked to write dates instead of relative times (`date_instruction`). What a small model
still writes relatively is rewritten here, by rules, against the day it was said
(`ground_relative_times`): "yesterday" said on 8 May 2023 becomes "on 7 May 2023", "last week"
becomes "the week before 8 May 2023", 去年 said in 2023 becomes 2022年 (docs/architecture.md,
"Time grounding").

Days are UTC days of the turns' `occurred_at` (a user's own time zone is not known). When a
snapshot spans several days, a relative time is read against the latest turn that says it; one
that no turn says (the LLM's own "today") is left as it is, rather than guessed.

Pure: no clock is read here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from events.snapshots import SnapshotPromoted
from handlers.rendering import Language

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_ZH_WEEKDAYS = "一二三四五六日"
_COUNTS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a couple of": 2,
}


def english_day(day: date) -> str:
    """``8 May 2023``: the format memories and contexts write dates in."""
    return f"{day.day} {_MONTHS[day.month - 1]} {day.year}"


def chinese_day(day: date) -> str:
    return f"{day.year}年{day.month}月{day.day}日"


def _month(day: date, offset: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + offset
    return index // 12, index % 12 + 1


def turn_days(snapshot: SnapshotPromoted) -> list[date]:
    """The UTC day of each of the snapshot's turns, in turn order."""
    return [turn.occurred_at.date() for turn in snapshot.turns]


def date_instruction(snapshot: SnapshotPromoted, language: Language) -> str:
    """The sentence the extractors get about when the conversation took place, and how to
    write times: dates, not relative times."""
    days = turn_days(snapshot)
    first, last = min(days), max(days)
    if language == "zh":
        when = (
            f"{chinese_day(first)}（星期{_ZH_WEEKDAYS[first.weekday()]}）"  # noqa: RUF001
            if first == last
            else f"{chinese_day(first)}至{chinese_day(last)}"
        )
        yesterday = chinese_day(last - timedelta(days=1))
        return (
            f"对话日期：{when}。把相对时间写成日期（例如“昨天”写成“{yesterday}”，"  # noqa: RUF001
            f"“去年”写成“{last.year - 1}年”）。"  # noqa: RUF001
        )
    if first == last:
        when = f"on {_WEEKDAYS[first.weekday()].capitalize()}, {english_day(first)}"
    else:
        when = f"between {english_day(first)} and {english_day(last)}"
    return (
        f"The conversation took place {when}. Write times as dates, not as relative times: "
        f'"yesterday" as "on {english_day(last - timedelta(days=1))}", "last week" as "the '
        f'week before {english_day(last)}", "last year" as "in {last.year - 1}".'
    )


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    render: Callable[[re.Match[str], date], str]


def _relative_days(offset: int, prefix: str = "on ") -> Callable[[re.Match[str], date], str]:
    return lambda _, day: f"{prefix}{english_day(day + timedelta(days=offset))}"


def _weekday(direction: int) -> Callable[[re.Match[str], date], str]:
    def render(match: re.Match[str], day: date) -> str:
        wanted = _WEEKDAYS.index(match["weekday"].lower())
        if direction < 0:  # the latest such weekday strictly before the day
            found = day - timedelta(days=(day.weekday() - wanted) % 7 or 7)
        else:  # the first one strictly after it
            found = day + timedelta(days=(wanted - day.weekday()) % 7 or 7)
        return f"on {_WEEKDAYS[wanted].capitalize()}, {english_day(found)}"

    return render


def _months_from(offset: int) -> Callable[[re.Match[str], date], str]:
    def render(_: re.Match[str], day: date) -> str:
        year, month = _month(day, offset)
        return f"in {_MONTHS[month - 1]} {year}"

    return render


def _ago(match: re.Match[str], day: date) -> str:
    count = _COUNTS.get(match["count"].lower()) or int(match["count"])
    unit = match["unit"].lower()
    if unit.startswith("day"):
        return f"on {english_day(day - timedelta(days=count))}"
    if unit.startswith("week"):
        return f"{count} week{'s' if count > 1 else ''} before {english_day(day)}"
    if unit.startswith("month"):
        year, month = _month(day, -count)
        return f"in {_MONTHS[month - 1]} {year}"
    return f"in {day.year - count}"


_COUNT = r"(?P<count>\d{1,2}|a couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_WEEKDAY = r"(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"

_ENGLISH: tuple[_Rule, ...] = tuple(
    _Rule(re.compile(rf"\b(?:{pattern})\b", re.IGNORECASE), render)
    for pattern, render in (
        (r"the day before yesterday", _relative_days(-2)),
        (r"the day after tomorrow", _relative_days(2)),
        (r"yesterday", _relative_days(-1)),
        (r"last night", lambda _, d: f"on the night of {english_day(d - timedelta(days=1))}"),
        (r"tomorrow", _relative_days(1)),
        (r"today|tonight|this (?:morning|afternoon|evening)", _relative_days(0)),
        (rf"(?:last|this past) {_WEEKDAY}", _weekday(-1)),
        (rf"next {_WEEKDAY}", _weekday(1)),
        (r"last weekend", lambda _, d: f"the weekend before {english_day(d)}"),
        (r"next weekend", lambda _, d: f"the weekend after {english_day(d)}"),
        (r"last week", lambda _, d: f"the week before {english_day(d)}"),
        (r"next week", lambda _, d: f"the week after {english_day(d)}"),
        (r"this week", lambda _, d: f"the week of {english_day(d)}"),
        (r"last month", _months_from(-1)),
        (r"next month", _months_from(1)),
        (r"this month", _months_from(0)),
        (r"last year", lambda _, d: f"in {d.year - 1}"),
        (r"next year", lambda _, d: f"in {d.year + 1}"),
        (r"this year", lambda _, d: f"in {d.year}"),
        (rf"{_COUNT} (?P<unit>days?|weeks?|months?|years?) ago", _ago),
    )
)

_CHINESE: tuple[_Rule, ...] = tuple(
    _Rule(re.compile(pattern), render)
    for pattern, render in (
        (r"前天", lambda _, d: chinese_day(d - timedelta(days=2))),
        (r"昨天|昨日|昨晚", lambda _, d: chinese_day(d - timedelta(days=1))),
        (r"今天|今日|今晚", lambda _, d: chinese_day(d)),
        (r"明天|明日", lambda _, d: chinese_day(d + timedelta(days=1))),
        (r"后天", lambda _, d: chinese_day(d + timedelta(days=2))),
        (r"上周|上个星期|上星期", lambda _, d: f"{chinese_day(d)}的前一周"),
        (r"下周|下个星期|下星期", lambda _, d: f"{chinese_day(d)}的后一周"),
        (r"上个月|上月", lambda _, d: "{}年{}月".format(*_month(d, -1))),
        (r"下个月|下月", lambda _, d: "{}年{}月".format(*_month(d, 1))),
        (r"去年", lambda _, d: f"{d.year - 1}年"),
        (r"明年", lambda _, d: f"{d.year + 1}年"),
        (r"今年", lambda _, d: f"{d.year}年"),
    )
)

_PREPOSITION_BEFORE = re.compile(r"\b(on|in|at|during)\s+$", re.IGNORECASE)


def said_on(expression: str, turns: Sequence[tuple[date, str]]) -> date | None:
    """The day a relative expression was said: the only day of the turns if they share one,
    else the latest turn whose text holds it (None: no turn says it)."""
    days = {day for day, _ in turns}
    if len(days) == 1:
        return next(iter(days))
    wanted = expression.casefold()
    for day, text in reversed(turns):
        if wanted in text.casefold():
            return day
    return None


@dataclass(frozen=True)
class Grounded:
    """A text with its relative times made absolute, and the dates or periods put in."""

    text: str
    dates: tuple[str, ...]


def ground_relative_times(text: str, turns: Sequence[tuple[date, str]]) -> Grounded:
    """Rewrite the relative times in `text` as dates, each against the day it was said
    (`said_on`); `turns` are the conversation's (day, text) pairs in order."""
    if not turns:
        return Grounded(text, ())
    found: list[str] = []
    for rule in (*_ENGLISH, *_CHINESE):
        text = _apply(rule, text, turns, found)
    return Grounded(text, tuple(found))


def _apply(rule: _Rule, text: str, turns: Sequence[tuple[date, str]], found: list[str]) -> str:
    parts: list[str] = []
    position = 0
    for match in rule.pattern.finditer(text):
        day = said_on(match.group(0), turns)
        if day is None:
            continue
        replacement = rule.render(match, day)
        before = text[position : match.start()]
        if replacement.startswith(("on ", "in ")) and _PREPOSITION_BEFORE.search(before):
            replacement = replacement.split(" ", 1)[1]  # "on last Saturday" → "on Saturday, …"
        if match.start() == 0 or text[: match.start()].rstrip().endswith((".", "!", "?")):
            replacement = replacement[:1].upper() + replacement[1:]
        parts += [before, replacement]
        found.append(replacement.removeprefix("on ").removeprefix("On ").removeprefix("in "))
        position = match.end()
    parts.append(text[position:])
    return "".join(parts)


_ABSOLUTE = re.compile(
    r"\b(?:(?:the\s+)?(?:week|weekend)\s+(?:before|after|of)\s+)?"
    r"(?:(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday),?\s+)?"
    r"(?:\d{1,2}(?:st|nd|rd|th)?\s+)?"
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
    r"(?:\s+\d{1,2}(?:st|nd|rd|th)?)?,?(?:\s+\d{4})?\b"
    r"|\b(?:1[89]|20)\d{2}\b"
    r"|\d{4}年(?:\d{1,2}月(?:\d{1,2}日)?)?(?:的[前后]一周)?"
)
"""Dates as `ground_relative_times` and the extractors write them (month and weekday names
capitalised, so the verb "may" is not a month)."""


def dates_in(text: str) -> list[str]:
    """The absolute dates `text` names, in order ("7 May 2023", "the week before 9 June 2023")."""
    return [match.group(0).strip(" ,") for match in _ABSOLUTE.finditer(text)]


def without_dates(text: str) -> str:
    """`text` with its absolute dates left out: what the grounding checks compare with the
    conversation's words (a date the extractor was told is not in any message)."""
    return _ABSOLUTE.sub(" ", text)


def dated_turns(snapshot: SnapshotPromoted) -> list[tuple[date, str]]:
    """The snapshot's turns as (UTC day, text) pairs, for `ground_relative_times`."""
    return [(turn.occurred_at.date(), turn.content) for turn in snapshot.turns]
