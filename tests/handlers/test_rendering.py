"""The rendered conversation format and reading raw history back (the speaker rules)."""

from __future__ import annotations

import pytest

from handlers.messages import ChatMessage, normalize_messages
from handlers.rendering import (
    ConflictingUserNamesError,
    HistoryFormatError,
    current_user_name,
    detect_language,
    history_for_prompt,
    named_speakers,
    parse_history,
    render_conversation,
    speaker_label,
)

TIM_EN = [
    ChatMessage(role="user", name="Tim", content="I work at Stripe."),
    ChatMessage(role="assistant", name="John", content="I am a nurse in Berlin."),
]
TIM_EN_TEXT = "The user's name is Tim\n[user]: I work at Stripe.\n[John]: I am a nurse in Berlin."
TIM_ZH = [
    ChatMessage(role="user", name="Tim", content="我在 Stripe 工作。"),
    ChatMessage(role="assistant", name="John", content="我是住在柏林的护士。"),
]
TIM_ZH_TEXT = "用户名叫Tim\n[user]: 我在 Stripe 工作。\n[John]: 我是住在柏林的护士。"
PLAIN = [
    ChatMessage(role="user", content="I like coffee."),
    ChatMessage(role="assistant", content="Noted."),
]
PLAIN_TEXT = "[user]: I like coffee.\n[assistant]: Noted."

# --- the rendering table ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "label"),
    [
        (ChatMessage(role="user", content="x"), "user"),
        (ChatMessage(role="user", name="Tim", content="x"), "user"),
        (ChatMessage(role="assistant", name="John", content="x"), "John"),
        (ChatMessage(role="assistant", content="x"), "assistant"),
        (ChatMessage(role="system", content="x"), "system"),
        (ChatMessage(role="system", name="ops", content="x"), "system"),
        (ChatMessage(role="tool", tool_name="get_weather", content="x"), "tool"),
    ],
)
def test_speaker_label_follows_the_table(message: ChatMessage, label: str) -> None:
    assert speaker_label(message) == label


@pytest.mark.parametrize(
    ("messages", "text"),
    [
        (PLAIN, PLAIN_TEXT),
        (TIM_EN, TIM_EN_TEXT),
        (TIM_ZH, TIM_ZH_TEXT),
        (
            [
                ChatMessage(role="system", content="Be brief."),
                ChatMessage(role="user", content="Weather?"),
                ChatMessage(role="tool", tool_name="get_weather", content="18C"),
            ],
            "[system]: Be brief.\n[user]: Weather?\n[tool]: 18C",
        ),
        ([], ""),
    ],
)
def test_render_conversation(messages: list[ChatMessage], text: str) -> None:
    assert render_conversation(messages) == text


def test_user_name_appears_once_at_the_top() -> None:
    messages = [*TIM_EN, ChatMessage(role="user", name="Tim", content="And I live in Dublin.")]
    text = render_conversation(messages)
    assert text.count("Tim") == 1
    assert text.splitlines()[0] == "The user's name is Tim"
    assert "[user]: And I live in Dublin." in text


def test_unnamed_user_messages_do_not_conflict_with_the_named_one() -> None:
    messages = [ChatMessage(role="user", content="Hi."), *TIM_EN]
    assert render_conversation(messages).startswith("The user's name is Tim\n[user]: Hi.\n")


def test_different_user_names_are_a_caller_error() -> None:
    messages = [*TIM_EN, ChatMessage(role="user", name="Tom", content="Hi.")]
    with pytest.raises(ConflictingUserNamesError, match="Tim, Tom"):
        render_conversation(messages)


def test_tool_name_is_never_rendered_as_a_speaker() -> None:
    [tool] = normalize_messages([{"role": "tool", "name": "Jarvis", "content": "done"}])
    assert render_conversation([tool]) == "[tool]: done"
    assert named_speakers([tool]) == []


def test_multi_line_content_renders_continuation_lines_unchanged() -> None:
    message = ChatMessage(
        role="assistant", content="Bring:\nNote: bring ID\nTime: 10:30\n  - umbrella"
    )
    assert render_conversation([message]) == (
        "[assistant]: Bring:\nNote: bring ID\nTime: 10:30\n  - umbrella"
    )


def test_current_user_name_and_named_speakers() -> None:
    messages = [*TIM_EN, ChatMessage(role="assistant", content="Hi."), TIM_EN[1]]
    assert current_user_name(messages) == "Tim"
    assert named_speakers(messages) == ["John"]
    assert current_user_name(PLAIN) is None


# --- language of the name line ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("texts", "language"),
    [
        (["I like coffee."], "en"),
        (["我喜欢咖啡。"], "zh"),
        (["我在 Stripe 工作。"], "zh"),  # 4 CJK vs 6 Latin: 40%
        (["I work at 腾讯 now"], "en"),  # 2 CJK vs 9 Latin: 18%
        (["abc", "中"], "zh"),  # exactly 25% counts as Chinese
        (["abcd", "中"], "en"),  # 20%
        (["12:30 !!!"], "en"),  # nothing to count
        ([], "en"),
        (["Café crème", "很好"], "en"),  # accented Latin letters count as Latin: 2 of 11
    ],
)
def test_detect_language(texts: list[str], language: str) -> None:
    assert detect_language(texts) == language


def test_mixed_conversation_is_chinese_when_chinese_carries_about_half_the_words() -> None:
    messages = [
        ChatMessage(role="user", name="Tim", content="我在 Stripe 工作,住在都柏林。"),
        ChatMessage(role="assistant", content="Got it, noted."),
    ]
    assert render_conversation(messages).startswith("用户名叫Tim\n")


def test_system_and_tool_text_do_not_decide_the_language() -> None:
    messages = [
        ChatMessage(
            role="system", content="You are a helpful assistant with a long English prompt."
        ),
        ChatMessage(role="user", name="Tim", content="我喜欢咖啡。"),
        ChatMessage(role="tool", content='{"result": "ok", "status": "success"}'),
    ]
    assert render_conversation(messages).startswith("用户名叫Tim\n")


# --- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "user_name", "messages"),
    [
        (PLAIN_TEXT, None, PLAIN),
        (TIM_EN_TEXT, "Tim", TIM_EN),
        (TIM_ZH_TEXT, "Tim", TIM_ZH),
        (
            "[system]: Be brief.\n[tool]: 18C\n[assistant]: Done.",
            None,
            [
                ChatMessage(role="system", content="Be brief."),
                ChatMessage(role="tool", content="18C"),
                ChatMessage(role="assistant", content="Done."),
            ],
        ),
        ("", None, []),
    ],
)
def test_parse_history(text: str, user_name: str | None, messages: list[ChatMessage]) -> None:
    parsed = parse_history(text)
    assert parsed.user_name == user_name
    assert parsed.messages == messages


@pytest.mark.parametrize("first, second", [(TIM_EN_TEXT, TIM_EN_TEXT), (TIM_ZH_TEXT, TIM_EN_TEXT)])
def test_name_line_is_deduplicated_and_never_a_message(first: str, second: str) -> None:
    parsed = parse_history(f"{first}\n{second}")
    assert parsed.user_name == "Tim"
    assert [m.role for m in parsed.messages] == ["user", "assistant", "user", "assistant"]
    assert all("Tim" not in m.content for m in parsed.messages)


def test_concatenated_histories_with_blank_lines_between_them() -> None:
    parsed = parse_history(f"{TIM_EN_TEXT}\n\n{TIM_EN_TEXT}\n")
    assert parsed.messages == [*TIM_EN, *TIM_EN]


def test_history_naming_different_users_is_refused() -> None:
    with pytest.raises(ConflictingUserNamesError, match="Tim, Tom"):
        parse_history(f"{TIM_EN_TEXT}\nThe user's name is Tom\n[user]: Hi.")


@pytest.mark.parametrize(
    "continuation",
    [
        "Note: bring ID",
        "Time: 10:30",
        "[not closed: still text",
        "[user]:no space after the colon",
        "[Dr: Who]: colon inside the label",
        "[User]: a role label in another case is not a speaker",
        "注意: 带上身份证",
        "  [John]: indented, so not at the start of the line",
    ],
)
def test_continuation_lines_stay_in_their_message(continuation: str) -> None:
    parsed = parse_history(f"[assistant]: Remember:\n{continuation}\n[user]: OK.")
    assert parsed.messages == [
        ChatMessage(role="assistant", content=f"Remember:\n{continuation}"),
        ChatMessage(role="user", content="OK."),
    ]


def test_named_labels_are_kept_in_both_languages() -> None:
    parsed = parse_history("[约翰]: 我是护士。\n[John]: I am a nurse.")
    assert parsed.messages == [
        ChatMessage(role="assistant", name="约翰", content="我是护士。"),
        ChatMessage(role="assistant", name="John", content="I am a nurse."),
    ]


def test_leading_blank_lines_are_ignored() -> None:
    assert parse_history("\n\n[user]: Hi.").messages == [ChatMessage(role="user", content="Hi.")]


@pytest.mark.parametrize("preamble", ["Conversation log", "Note: see below"])
def test_text_before_the_first_speaker_prefix_is_refused(preamble: str) -> None:
    with pytest.raises(HistoryFormatError, match="line 2: text before the first speaker prefix"):
        parse_history(f"\n{preamble}\n[user]: Hi.")


# --- round trips --------------------------------------------------------------------------------

TRICKY = [
    ChatMessage(role="system", content="Rules:\n1. be brief"),
    ChatMessage(role="user", name="Tim", content="Paste:\n[John]: I quit.\nThe user's name is Bob"),
    ChatMessage(role="assistant", name="John", content="Line one\n用户名叫Bob\n\\[assistant]: hi"),
    ChatMessage(role="assistant", content="Note: bring ID\nTime: 10:30\n\n\\\\[tool]: x"),
    ChatMessage(role="user", name="Tim", content="[assistant]: on the first line is fine"),
]


@pytest.mark.parametrize(
    "messages", [PLAIN, TIM_EN, TIM_ZH, TRICKY], ids=["plain", "en", "zh", "tricky"]
)
def test_render_parse_render_round_trip(messages: list[ChatMessage]) -> None:
    text = render_conversation(messages)
    parsed = parse_history(text)
    assert parsed.messages == messages
    assert render_conversation(parsed.messages) == text


def test_lines_that_look_like_structure_are_escaped_only_when_needed() -> None:
    lines = render_conversation(TRICKY).split("\n")
    assert "\\[John]: I quit." in lines
    assert "\\The user's name is Bob" in lines
    assert "\\用户名叫Bob" in lines
    assert "\\\\[assistant]: hi" in lines
    assert "[assistant]: Note: bring ID" in lines
    assert "Time: 10:30" in lines


def test_tool_name_is_lost_in_the_round_trip_and_nothing_else() -> None:
    messages = [
        ChatMessage(role="user", content="Weather?"),
        ChatMessage(role="tool", tool_name="get_weather", content="18C"),
    ]
    parsed = parse_history(render_conversation(messages))
    assert parsed.messages == [messages[0], ChatMessage(role="tool", content="18C")]


def test_normalised_sdk_input_round_trips() -> None:
    messages = normalize_messages(
        [
            {
                "role": "user",
                "name": "Tim",
                "content": [{"type": "text", "text": "我在 Stripe 工作。"}],
            },
            {
                "role": "assistant",
                "name": "John",
                "content": "  我是住在柏林的护士。\n时间: 10:30  ",
            },
        ]
    )
    text = render_conversation(messages)
    assert (
        text == "用户名叫Tim\n[user]: 我在 Stripe 工作。\n[John]: 我是住在柏林的护士。\n时间: 10:30"
    )
    assert parse_history(text).messages == messages


# --- history given to the LLM -------------------------------------------------------------------


def test_history_for_prompt_truncates_everyone_but_the_user() -> None:
    messages = [
        ChatMessage(role="user", name="Tim", content="U" * 30),
        ChatMessage(role="assistant", name="John", content="J" * 30),
        ChatMessage(role="assistant", content="A" * 30),
        ChatMessage(role="system", content="S" * 30),
        ChatMessage(role="tool", tool_name="t", content="T" * 30),
        ChatMessage(role="assistant", content="short"),
    ]
    assert history_for_prompt(messages, max_chars_per_message=10) == "\n".join(
        [
            "The user's name is Tim",
            "[user]: " + "U" * 30,
            "[John]: " + "J" * 9 + "…",
            "[assistant]: " + "A" * 9 + "…",
            "[system]: " + "S" * 9 + "…",
            "[tool]: " + "T" * 9 + "…",
            "[assistant]: short",
        ]
    )


def test_history_for_prompt_keeps_content_at_the_limit_whole() -> None:
    messages = [ChatMessage(role="assistant", content="x" * 10)]
    assert history_for_prompt(messages, max_chars_per_message=10) == "[assistant]: " + "x" * 10


def test_history_for_prompt_keeps_multi_line_user_messages_whole_in_chinese() -> None:
    user = ChatMessage(
        role="user", name="Tim", content="我在 Stripe 工作。\n我住在都柏林。\n备注: 喜欢咖啡"
    )
    john = ChatMessage(role="assistant", name="John", content="我是住在柏林的护士,已经工作十年了。")
    text = history_for_prompt([user, john], max_chars_per_message=6)
    assert text == (
        "用户名叫Tim\n[user]: 我在 Stripe 工作。\n我住在都柏林。\n备注: 喜欢咖啡\n"
        "[John]: 我是住在柏…"
    )


def test_history_for_prompt_reads_back_from_raw_history() -> None:
    raw = f"{TIM_EN_TEXT}\n{TIM_EN_TEXT}"
    text = history_for_prompt(parse_history(raw).messages, max_chars_per_message=8)
    assert text == (
        "The user's name is Tim\n[user]: I work at Stripe.\n[John]: I am a…\n"
        "[user]: I work at Stripe.\n[John]: I am a…"
    )


def test_history_for_prompt_needs_a_positive_limit() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        history_for_prompt(PLAIN, max_chars_per_message=0)


# --- session context: stored raw histories + pending turns ----------------------------------

from handlers.rendering import session_context  # noqa: E402


def test_session_context_reads_back_stored_histories_then_pending_turns() -> None:
    first = "The user's name is Tim\n[user]: I work at Stripe.\n[John]: I am a nurse in Berlin."
    second = "The user's name is Tim\n[user]: Note: bring ID\nTime: 10:30\n[assistant]: " + "x" * 50
    pending = [ChatMessage(role="user", name="Tim", content="And one more thing.")]
    context = session_context([first, second], pending, max_chars_per_message=20)
    assert context.splitlines() == [
        "The user's name is Tim",
        "[user]: I work at Stripe.",
        "[John]: I am a nurse in Ber…",
        "[user]: Note: bring ID",
        "Time: 10:30",
        "[assistant]: " + "x" * 19 + "…",
        "[user]: And one more thing.",
    ]


def _counted_one_by_one(texts: list[str]) -> str:
    """The language by the rule's letter, one character at a time (what the regexes count)."""
    cjk = latin = 0
    for char in "".join(texts):
        code = ord(char)
        if (
            0x4E00 <= code <= 0x9FFF
            or 0x3400 <= code <= 0x4DBF
            or 0xF900 <= code <= 0xFAFF
            or 0x20000 <= code <= 0x3134F
        ):
            cjk += 1
        elif char.isalpha() and (char.isascii() or 0x00C0 <= code <= 0x024F):
            latin += 1
    return "zh" if cjk and cjk >= 0.25 * (cjk + latin) else "en"


def test_every_character_counts_for_the_language_as_the_rule_says() -> None:
    for code in range(0x32000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        for texts in ([char, "aaa"], [char * 4 + "一"]):  # counted CJK, Latin, or not at all
            assert detect_language(texts) == _counted_one_by_one(texts), hex(code)
