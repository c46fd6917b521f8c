"""Fuzzing the message normaliser: whatever an application passes, `normalize_messages` either
refuses it with `InvalidMessageError` (or `TypeError` for a non-list) or returns messages that
make valid, encodable turns (docs/architecture.md, "Turns")."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from events.codec import encode
from events.turns import ROLES, TurnRecorded
from handlers.messages import ChatMessage, InvalidMessageError, normalize_messages
from tests.support.fuzz import FUZZ, JSON

SNIPPETS = st.sampled_from(
    ["[user]: ", "[John]: ", "\n", "\\", "The user's name is ", "用户名叫", ":", "[", "]", " "]
)
TEXT = st.lists(
    st.one_of(SNIPPETS, st.text(alphabet=st.characters() | st.characters(categories=["Cs"]))),
    max_size=6,
).map("".join)
NAMES = st.one_of(st.none(), TEXT, st.sampled_from(["Tim", "John", "user", " Tim ", "x" * 150]))
BLOCK = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
    st.fixed_dictionaries(
        {"type": st.just("tool_use"), "name": NAMES, "input": JSON},
        optional={"id": st.sampled_from(["c1", "c2"])},
    ),
    st.fixed_dictionaries(
        {"type": st.just("tool_result"), "content": st.one_of(TEXT, JSON)},
        optional={"tool_use_id": st.sampled_from(["c1", "c2"]), "is_error": st.booleans()},
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["image", "thinking"])}),
    JSON,
)
MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {"role": st.one_of(st.sampled_from([*ROLES, "robot"]), JSON)},
        optional={
            "content": st.one_of(TEXT, st.lists(BLOCK, max_size=3), JSON),
            "name": NAMES,
            "tool_call_id": st.sampled_from(["c1", "c2"]),
            "tool_calls": st.lists(
                st.fixed_dictionaries(
                    {"function": st.fixed_dictionaries({"name": NAMES, "arguments": JSON})},
                    optional={"id": st.sampled_from(["c1", "c2"])},
                ),
                max_size=2,
            ),
        },
    ),
    JSON,
)


def as_turn(message: ChatMessage) -> TurnRecorded:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return TurnRecorded(
        event_id="t1",
        occurred_at=now,
        recorded_at=now,
        user_id="u1",
        session_id="s1",
        role=message.role,
        name=message.name,
        tool_name=message.tool_name,
        content=message.content,
    )


@FUZZ
@given(st.lists(MESSAGE, max_size=4))
@example([{"role": "user", "content": "\ud800"}])  # found: a lone surrogate could not be encoded
@example([{"role": "assistant", "name": "x" * 150, "content": "hi"}])  # found: name over 100
@example([{"role": "tool", "name": "t" * 250, "content": "18C"}])  # found: tool name over 200
@example(  # found: json.dumps raised TypeError on tool arguments that are not JSON
    [
        {
            "role": "assistant",
            "tool_calls": [{"function": {"name": "f", "arguments": {1: 2, "a": 3}}}],
        }
    ]
)
def test_normalised_messages_are_refused_or_make_valid_turns(messages: list[Any]) -> None:
    try:
        normalised = normalize_messages(messages, max_content_chars=2_000)
    except InvalidMessageError:
        return
    for message in normalised:
        assert message.content and message.content == message.content.strip()
        assert len(message.content) <= 2_000
        encode(as_turn(message))  # valid and encodable


@FUZZ
@given(st.one_of(JSON, TEXT, st.binary()))
def test_anything_but_a_list_of_messages_is_refused(value: Any) -> None:
    with contextlib.suppress(InvalidMessageError, TypeError):
        normalize_messages(value)
