"""Fuzzing the rendered format: any normalised conversation renders, parses back to the same
messages (a tool's or a system message's name aside: neither is rendered) and renders to the
same text (docs/architecture.md, "Speakers"); parsing any text raises only the documented
errors."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import assume, example, given
from hypothesis import strategies as st

from events.turns import ROLES
from handlers.messages import ChatMessage, InvalidMessageError, normalize_messages
from handlers.rendering import (
    ConflictingUserNamesError,
    HistoryFormatError,
    parse_history,
    render_conversation,
)
from tests.support.fuzz import FUZZ

LINES = st.sampled_from(
    [
        "[user]: ",
        "[John]: ",
        "[assistant]: ",
        "[tool]: ",
        "\\",
        "\\\\",
        "The user's name is Bob",
        "用户名叫Bob",
        "\n",
        ":",
        "[",
        "]",
        " ",
        "\r",
        "\t",
    ]
)
TEXT = st.lists(st.one_of(LINES, st.text(max_size=8)), max_size=8).map("".join)
RAW = st.fixed_dictionaries(
    {"role": st.sampled_from(ROLES), "content": TEXT},
    optional={"name": st.sampled_from(["Tim", "John", "Li Na", "Zoë", " Ann "])},
)


def normalised(raw: list[dict[str, str]]) -> list[ChatMessage]:
    try:
        return normalize_messages(raw)
    except InvalidMessageError:
        assume(False)
        raise


@FUZZ
@given(st.lists(RAW, min_size=1, max_size=5))
@example([{"role": "user", "content": "a\n[John]: x\nThe user's name is Bob\n\\[tool]: y"}])
def test_render_parse_render_is_exact(raw: list[dict[str, str]]) -> None:
    messages = normalised(raw)
    try:
        text = render_conversation(messages)
    except ConflictingUserNamesError:
        return
    parsed = parse_history(text)
    user_name = next((m.name for m in messages if m.role == "user" and m.name), None)
    names = {"user": user_name, "system": None}  # a system message's name is not rendered
    expected = [replace(m, tool_name=None, name=names.get(m.role, m.name)) for m in messages]
    assert parsed.messages == expected
    assert render_conversation(parsed.messages) == text


@FUZZ
@given(st.lists(st.one_of(LINES, st.text(max_size=10)), max_size=12).map("".join))
def test_parsing_any_text_raises_only_the_documented_errors(text: str) -> None:
    try:
        parsed = parse_history(text)
    except (HistoryFormatError, ConflictingUserNamesError):
        return
    for message in parsed.messages:
        assert message.role in ROLES
