"""Restatement by wording: one memory's words opening another's."""

from __future__ import annotations

import pytest

from handlers.restatement import extends, one_opens_the_other, restates, words


def test_words_are_compared_case_and_punctuation_aside_and_chinese_by_character() -> None:
    assert words("Sam is a friend of Evan's.") == ["sam", "is", "a", "friend", "of", "evan", "s"]
    assert words("用户喜欢猫。") == ["用", "户", "喜", "欢", "猫"]


@pytest.mark.parametrize(
    ("new", "known"),
    [
        ("Sam is a friend of Evan's.", "Sam is a friend of Evan's who is also a teacher."),
        ("The user likes green tea", "the user likes green tea."),
        ("用户喜欢爬山。", "用户喜欢爬山，每个周末都去。"),
    ],
)
def test_a_memory_whose_words_open_a_known_one_restates_it(new: str, known: str) -> None:
    assert restates(new, known)


@pytest.mark.parametrize(
    ("new", "known"),
    [
        ("The user is vegetarian.", "The user is vegetarian no longer."),
        ("The user works at Google.", "The user works at Google but quit in 2020."),
        ("用户喜欢爬山。", "用户喜欢爬山，但不再去了。"),
    ],
)
def test_an_opening_the_known_memory_turns_around_is_not_a_restatement(
    new: str, known: str
) -> None:
    assert not restates(new, known)
    assert extends(known, new)  # the other way round it extends


@pytest.mark.parametrize(
    ("new", "known"),
    [
        ("Sam is a friend of Evan's who is also a teacher.", "Sam is a friend of Evan's."),
        ("The user has two cats and a dog.", "The user has two cats."),
    ],
)
def test_a_memory_that_opens_with_a_known_one_and_says_more_extends_it(
    new: str, known: str
) -> None:
    assert extends(new, known)
    assert not restates(new, known)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("The user has two cats.", "The user has three cats."),
        ("The user likes tea.", "The user likes coffee."),
        ("John plays drums", "John plays drums in a band."),  # an opening of three words
    ],
)
def test_memories_that_differ_in_their_opening_or_share_too_few_words_are_neither(
    one: str, other: str
) -> None:
    for a, b in ((one, other), (other, one)):
        assert not restates(a, b)
        assert not extends(a, b)


def test_the_same_words_restate_but_do_not_extend() -> None:
    assert restates("The user likes tea.", "The user likes tea!")
    assert not extends("The user likes tea.", "The user likes tea!")


def test_one_opens_the_other_either_way_even_when_the_rest_turns_it_around() -> None:
    short, long = "The user is vegetarian.", "The user is vegetarian no longer."
    assert one_opens_the_other(short, long) and one_opens_the_other(long, short)
    assert one_opens_the_other("The user likes tea.", "the user likes tea!")
    assert not one_opens_the_other("The user has two cats.", "The user has three cats.")
    assert not one_opens_the_other("John plays drums", "John plays drums in a band.")
