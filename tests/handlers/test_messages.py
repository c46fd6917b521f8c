"""Normalising OpenAI- and Anthropic-style messages (the SDK's input rules)."""

from __future__ import annotations

from typing import Any

import pytest

from events.turns import speaker_name_problem
from handlers.messages import ChatMessage, InvalidMessageError, normalize_messages

# --- OpenAI style -------------------------------------------------------------------------------


def test_openai_string_messages_keep_role_name_and_content() -> None:
    messages = [
        {"role": "user", "name": "Tim", "content": "I work at Stripe."},
        {"role": "assistant", "name": "John", "content": "I am a nurse in Berlin."},
        {"role": "assistant", "content": "Noted."},
        {"role": "system", "content": "Be brief."},
    ]
    assert normalize_messages(messages) == [
        ChatMessage(role="user", name="Tim", content="I work at Stripe."),
        ChatMessage(role="assistant", name="John", content="I am a nurse in Berlin."),
        ChatMessage(role="assistant", content="Noted."),
        ChatMessage(role="system", content="Be brief."),
    ]


def test_chinese_messages_are_kept_as_they_are() -> None:
    messages = [
        {"role": "user", "name": "Tim", "content": "我在 Stripe 工作。"},
        {"role": "assistant", "name": "John", "content": "我是住在柏林的护士。"},
    ]
    assert normalize_messages(messages) == [
        ChatMessage(role="user", name="Tim", content="我在 Stripe 工作。"),
        ChatMessage(role="assistant", name="John", content="我是住在柏林的护士。"),
    ]


def test_openai_text_parts_are_joined_with_newlines() -> None:
    content = [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]
    assert normalize_messages([{"role": "user", "content": content}]) == [
        ChatMessage(role="user", content="first\nsecond")
    ]


def test_surrounding_whitespace_and_name_padding_are_stripped() -> None:
    [message] = normalize_messages([{"role": "assistant", "name": " John ", "content": "  hi\n"}])
    assert message == ChatMessage(role="assistant", name="John", content="hi")


def test_null_name_is_no_name() -> None:
    [message] = normalize_messages([{"role": "assistant", "name": None, "content": "hi"}])
    assert message.name is None


@pytest.mark.parametrize(
    "extra", [{"name": "get_weather"}, {"name": "get_weather", "tool_call_id": "c1"}]
)
def test_tool_message_name_is_the_tools_name_never_a_speaker(extra: dict[str, Any]) -> None:
    [message] = normalize_messages([{"role": "tool", "content": "18C, sunny", **extra}])
    assert message == ChatMessage(role="tool", content="18C, sunny", tool_name="get_weather")
    assert message.name is None


def test_tool_name_may_contain_characters_forbidden_in_speaker_names() -> None:
    [message] = normalize_messages([{"role": "tool", "name": "ns:search[v2]", "content": "ok"}])
    assert message.tool_name == "ns:search[v2]"


def test_assistant_tool_calls_are_kept_as_text_and_name_the_tool_result() -> None:
    messages: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
    ]
    assert normalize_messages(messages) == [
        ChatMessage(role="assistant", content='called tool get_weather with {"city": "Paris"}'),
        ChatMessage(role="tool", content="18C", tool_name="get_weather"),
    ]


def test_tool_calls_follow_the_assistants_own_text() -> None:
    message = {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [{"id": "c", "function": {"name": "lookup", "arguments": ""}}],
    }
    [normalised] = normalize_messages([message])
    assert normalised.content == "Let me check.\ncalled tool lookup with {}"


# --- Anthropic style ----------------------------------------------------------------------------


def test_anthropic_text_blocks_are_joined_and_name_kept() -> None:
    message = {
        "role": "assistant",
        "name": "John",
        "content": [
            {"type": "text", "text": "I am a nurse."},
            {"type": "text", "text": "In Berlin."},
        ],
    }
    assert normalize_messages([message]) == [
        ChatMessage(role="assistant", name="John", content="I am a nurse.\nIn Berlin.")
    ]


def test_anthropic_non_text_blocks_are_skipped_when_there_is_text() -> None:
    content = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "..."}},
        {"type": "text", "text": "What is in this picture?"},
    ]
    assert normalize_messages([{"role": "user", "content": content}]) == [
        ChatMessage(role="user", content="What is in this picture?")
    ]


def test_anthropic_tool_use_and_tool_result_become_call_text_and_tool_message() -> None:
    messages: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "tu_1",
                    "name": "get_weather",
                    "input": {"city": "巴黎"},
                },
            ],
        },
        {
            "role": "user",
            "name": "Tim",
            "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": "18C"},
                {"type": "text", "text": "Thanks!"},
            ],
        },
    ]
    assert normalize_messages(messages) == [
        ChatMessage(
            role="assistant", content='Checking.\ncalled tool get_weather with {"city": "巴黎"}'
        ),
        ChatMessage(role="tool", content="18C", tool_name="get_weather"),
        ChatMessage(role="user", name="Tim", content="Thanks!"),
    ]


def test_tool_result_blocks_alone_yield_only_tool_messages() -> None:
    content = [
        {
            "type": "tool_result",
            "tool_use_id": "unknown",
            "is_error": True,
            "content": [{"type": "text", "text": "timeout"}],
        }
    ]
    assert normalize_messages([{"role": "user", "content": content}]) == [
        ChatMessage(role="tool", content="error: timeout")
    ]


# --- refusals -----------------------------------------------------------------------------------

GOOD: dict[str, Any] = {"role": "user", "content": "fine"}


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("hello", "expected a mapping with 'role' and 'content', got str"),
        ({"content": "hi"}, "missing 'role'; allowed roles: user, assistant, system, tool"),
        (
            {"role": "bot", "content": "hi"},
            "unknown role 'bot'; allowed roles: user, assistant, system, tool",
        ),
        ({"role": "User", "content": "hi"}, "unknown role 'User'"),
        ({"role": "user"}, "missing 'content'"),
        ({"role": "assistant", "content": None}, "missing 'content'"),
        (
            {"role": "user", "content": 42},
            "'content' must be a string or a list of content blocks, got int",
        ),
        ({"role": "user", "name": 7, "content": "hi"}, "'name' must be a string, got int"),
        ({"role": "user", "content": ""}, "content is empty"),
        ({"role": "user", "content": "  \n\t "}, "content is empty"),
        ({"role": "user", "content": [{"type": "text", "text": " "}]}, "content is empty"),
        ({"role": "user", "content": []}, "content is empty"),
        (
            {"role": "user", "content": [{"type": "image", "source": {}}]},
            "content has no text (only image blocks)",
        ),
        (
            {"role": "user", "content": ["plain string"]},
            "content block 0 must be a mapping, got str",
        ),
        ({"role": "user", "content": [{"text": "x"}]}, "content block 0 has no string 'type'"),
        (
            {"role": "user", "content": [{"type": "text", "text": None}]},
            "text block 0 has no string 'text'",
        ),
        ({"role": "user", "name": "", "content": "hi"}, "name is empty"),
        ({"role": "user", "name": "   ", "content": "hi"}, "name is empty"),
        (
            {"role": "assistant", "name": "[John]", "content": "hi"},
            "contains one of '[', ']' or ':'",
        ),
        (
            {"role": "assistant", "name": "Dr: John", "content": "hi"},
            "contains one of '[', ']' or ':'",
        ),
        ({"role": "assistant", "name": "John\nDoe", "content": "hi"}, "line break"),
        ({"role": "assistant", "name": "User", "content": "hi"}, "is a role label"),
        ({"role": "user", "name": "assistant", "content": "hi"}, "is a role label"),
        (
            {"role": "user", "name": "a:b", "content": [{"type": "tool_result", "content": "x"}]},
            "contains one of",
        ),
        ({"role": "assistant", "content": None, "tool_calls": "x"}, "'tool_calls' must be a list"),
        (
            {"role": "assistant", "content": None, "tool_calls": [{"function": {}}]},
            "tool_calls[0] has no function name",
        ),
        (
            {"role": "assistant", "content": [{"type": "tool_use", "input": {}}]},
            "tool_use block 0 has no tool 'name'",
        ),
    ],
)
def test_malformed_message_is_refused_with_its_index_and_reason(bad: Any, reason: str) -> None:
    with pytest.raises(InvalidMessageError) as refused:
        normalize_messages([GOOD, GOOD, bad])
    assert str(refused.value).startswith("message 2: ")
    assert reason in str(refused.value)
    assert refused.value.index == 2
    assert isinstance(refused.value, ValueError)


def test_over_long_content_is_refused_at_the_default_limit() -> None:
    normalize_messages([{"role": "user", "content": "x" * 32_000}])
    with pytest.raises(
        InvalidMessageError,
        match=r"message 0: content is 32001 characters, over the limit of 32000",
    ):
        normalize_messages([{"role": "user", "content": "x" * 32_001}])


def test_over_long_content_limit_is_a_parameter() -> None:
    with pytest.raises(InvalidMessageError, match="message 1: content is 11 characters"):
        normalize_messages([GOOD, {"role": "user", "content": "x" * 11}], max_content_chars=10)


@pytest.mark.parametrize("messages", ["hello", {"role": "user"}, None])
def test_messages_must_be_a_list(messages: Any) -> None:
    with pytest.raises(TypeError, match="messages must be a list"):
        normalize_messages(messages)


def test_empty_list_normalises_to_nothing() -> None:
    assert normalize_messages([]) == []


# --- the ChatMessage invariants -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"role": "bot", "content": "x"}, "unknown role"),
        ({"role": "tool", "name": "get_weather", "content": "x"}, "use tool_name"),
        ({"role": "user", "tool_name": "get_weather", "content": "x"}, "only for role='tool'"),
        ({"role": "assistant", "name": "[John]", "content": "x"}, "contains one of"),
    ],
)
def test_chat_message_refuses_inconsistent_fields(kwargs: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        ChatMessage(**kwargs)


@pytest.mark.parametrize("name", ["John", "Mary Ann", "约翰", "O'Brien", "J.-P."])
def test_ordinary_names_are_valid_speaker_names(name: str) -> None:
    assert speaker_name_problem(name) is None
