"""Narration: what the people in a conversation said to each other is not a memory."""

from __future__ import annotations

import pytest

from handlers.extraction.narration import narrates, only_narration

NAMES = ["John", "Tim", "张伟", "李娜"]


@pytest.mark.parametrize(
    "sentence",
    [
        "John told the user that books can really inspire us.",
        "John congratulated the user on the new job!",
        "The user thanked John for the encouragement.",
        "The user expressed gratitude to John for offering to help.",
        "John expressed his thanks for the tips.",
        "She showed her appreciation for the support.",
        "He asked how it happened.",
        "Tim was encouraged by John.",  # "was" + a courtesy: still the exchange itself
        "The assistant replied with a greeting.",
        "The user asked about the weather in Reykjavik.",
        "The user asked for a packing list.",
        "John also wished the user luck.",
        "张伟恭喜李娜",
        "她感谢用户的鼓励。",
        "用户询问了天气。",
        "李娜对张伟的好消息表示祝贺",
        "并询问如何找到的。",
    ],
)
def test_a_sentence_about_what_a_participant_said_narrates(sentence: str) -> None:
    assert narrates(sentence, NAMES)


@pytest.mark.parametrize(
    "sentence",
    [
        "John shared his surfing story from 2018.",
        "The user and John discussed a Harry Potter fan project.",
        "John told the user about his trip to Seattle.",
        "John works at a bank.",
        "The user asked her boss for a raise in May.",  # someone outside the conversation
        "Maria thanked the nurses.",  # Maria is not a participant
        "Maria expressed gratitude to the nurses.",  # Maria is not a participant
        "张伟在上海工作。",
    ],
)
def test_a_sentence_about_what_is_true_or_what_happened_does_not_narrate(sentence: str) -> None:
    assert not narrates(sentence, NAMES)


def test_a_name_of_the_conversation_is_needed_for_a_named_opening() -> None:
    assert not narrates("John told the user that books inspire.")
    assert narrates("John told the user that books inspire.", ["John"])


def test_a_text_is_only_narration_when_every_sentence_narrates() -> None:
    assert only_narration("John congratulated the user! He asked how it happened.", NAMES)
    assert not only_narration("The user asked John about work. John works at a bank now.", NAMES)


def test_chinese_clauses_count_as_sentences() -> None:
    assert not only_narration("张伟恭喜李娜，李娜的女儿最近在学钢琴。", NAMES)
    assert only_narration("张伟恭喜李娜，李娜感谢张伟。", NAMES)
    assert only_narration("李娜对张伟的好消息表示祝贺，并询问如何找到的。", NAMES)


def test_empty_text_is_not_narration() -> None:
    assert not only_narration("", NAMES)
