"""The context block: profile, memories of each type in turns, the session, within a limit."""

from __future__ import annotations

from datetime import date

import pytest

from handlers.context import ContextMemory, context_block
from handlers.recall import PastMessage

PROFILE = {"name": "Tim", "employer": "The user works at Stripe."}
MEMORIES = [
    ContextMemory("semantic", "The user likes espresso."),
    ContextMemory("semantic", "The user cycles to work."),
    ContextMemory("episodic", "The user moved to Porto in May."),
    ContextMemory("procedural", "When the user asks for code: answer in Python."),
]
HISTORY = "[user]: hi\n[assistant]: hello\n[user]: what's new?"


def test_every_part_under_its_label_in_order() -> None:
    block = context_block(
        profile=PROFILE, memories=MEMORIES, history=HISTORY, language="en", max_chars=2_000
    )
    assert block == (
        "## About the user\n- The user's name is Tim.\n- The user works at Stripe.\n\n"
        "## Facts\n- The user likes espresso.\n- The user cycles to work.\n\n"
        "## Past events\n- The user moved to Porto in May.\n\n"
        "## How to work with the user\n- When the user asks for code: answer in Python.\n\n"
        "## This conversation so far\n[user]: hi\n[assistant]: hello\n[user]: what's new?"
    )


def test_chinese_labels_for_a_chinese_conversation() -> None:
    block = context_block(
        profile={"name": "李雷"},
        memories=[ContextMemory("semantic", "用户喜欢咖啡。")],
        history="",
        language="zh",
        max_chars=500,
    )
    assert block == "## 关于用户\n- 用户名叫李雷\n\n## 事实\n- 用户喜欢咖啡。"


@pytest.mark.parametrize("limit", [0, 20, 60, 120, 180, 250, 400])
def test_the_block_never_exceeds_its_limit_and_never_cuts_a_memory(limit: int) -> None:
    block = context_block(
        profile=PROFILE, memories=MEMORIES, history=HISTORY, language="en", max_chars=limit
    )
    assert len(block) <= limit
    for memory in MEMORIES:
        if memory.text[:10] in block:
            assert memory.text in block


def test_a_tight_limit_takes_the_best_of_each_type_before_the_second_of_any() -> None:
    block = context_block(profile={}, memories=MEMORIES, history="", language="en", max_chars=170)
    assert "The user likes espresso." in block and "The user moved to Porto" in block
    assert "The user cycles to work." not in block


def test_the_oldest_messages_are_left_out_first_with_a_marker() -> None:
    long_history = "\n".join(f"[user]: message {i}" for i in range(50))
    block = context_block(
        profile={}, memories=[], history=long_history, language="en", max_chars=150
    )
    assert block.endswith("[user]: message 49")
    assert "(earlier messages left out)" in block and "message 0\n" not in block
    assert len(block) <= 150


def test_a_memory_already_in_the_profile_is_not_repeated() -> None:
    memories = [ContextMemory("semantic", "The user works at Stripe.")]
    block = context_block(
        profile=PROFILE, memories=memories, history="", language="en", max_chars=500
    )
    assert block.count("The user works at Stripe.") == 1


def test_each_memory_opens_with_the_day_it_was_learned() -> None:
    from datetime import date

    block = context_block(
        profile={},
        memories=[
            ContextMemory("semantic", "The user works at Stripe.", date(2023, 5, 8)),
            ContextMemory("episodic", "The user moved to Porto."),
        ],
        history="",
        language="en",
        max_chars=500,
    )
    assert "- [8 May 2023] The user works at Stripe." in block
    assert "- The user moved to Porto." in block
    chinese = context_block(
        profile={},
        memories=[ContextMemory("semantic", "用户喜欢咖啡。", date(2023, 5, 8))],
        history="",
        language="zh",
        max_chars=500,
    )
    assert "- [2023年5月8日] 用户喜欢咖啡。" in chinese


def test_a_custom_type_has_its_declared_heading_after_the_built_in_types() -> None:
    memories = [
        ContextMemory("misconception", "The user believes plants eat soil."),
        ContextMemory("semantic", "The user likes espresso."),
        ContextMemory("open_ticket", "The user's charger is broken."),
    ]
    block = context_block(
        profile={},
        memories=memories,
        history="",
        language="en",
        max_chars=2_000,
        custom_headings={"misconception": "Misconceptions"},
    )
    assert block == (
        "## Facts\n- The user likes espresso.\n\n"
        "## Misconceptions\n- The user believes plants eat soil.\n\n"
        "## open_ticket\n- The user's charger is broken."
    )


PAST = [
    PastMessage("Caroline", "I went to the LGBTQ support group yesterday.", date(2023, 5, 8)),
    PastMessage("Melanie", "We went camping at the beach last weekend!", date(2023, 5, 25)),
]


def test_past_messages_come_dated_under_their_label_before_the_session() -> None:
    block = context_block(
        profile={},
        memories=MEMORIES[:1],
        history=HISTORY,
        language="en",
        max_chars=2_000,
        past_messages=PAST,
    )
    assert block == (
        "## Facts\n- The user likes espresso.\n\n"
        "## From earlier conversations\n"
        "- [8 May 2023] Caroline: I went to the LGBTQ support group yesterday.\n"
        "- [25 May 2023] Melanie: We went camping at the beach last weekend!\n\n"
        "## This conversation so far\n[user]: hi\n[assistant]: hello\n[user]: what's new?"
    )


def test_a_tight_limit_takes_the_best_past_message_in_turn_with_the_memories() -> None:
    block = context_block(
        profile={}, memories=MEMORIES, history="", language="en", max_chars=280, past_messages=PAST
    )
    assert "The user likes espresso." in block and "support group" in block
    assert "The user cycles to work." not in block and "camping" not in block
    assert len(block) <= 280


def test_past_messages_in_a_chinese_conversation_have_the_chinese_label_and_dates() -> None:
    block = context_block(
        profile={},
        memories=[],
        history="",
        language="zh",
        max_chars=500,
        past_messages=[PastMessage("User", "我上周去了杭州。", date(2023, 5, 8))],
    )
    assert block == "## 以往对话摘录\n- [2023年5月8日] User: 我上周去了杭州。"
