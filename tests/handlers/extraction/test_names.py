"""Names a memory should not hold: invented ones, and the user's own name for someone else."""

from __future__ import annotations

import pytest

from handlers.extraction.names import invented_names, names_the_user_as_another

SAID = [
    "I've known these friends for 4 years, since I moved from my home country.",
    "This necklace is a gift from my grandma in my home country, Sweden.",
    "We went to the LGBTQ+ pride parade last week!",
]


def test_a_place_no_one_named_is_invented() -> None:
    assert invented_names("The user moved to France in 2019.", SAID) == ["France"]


@pytest.mark.parametrize(
    "statement",
    [
        "The user moved from Sweden four years ago.",
        "The user's grandma in Sweden's north gave her a necklace.",  # possessive
        "The user went to the LGBTQ+ pride parade.",
        "The user went to a parade on Friday, 23 June 2023.",  # the calendar
        "France is where the user's friends are from.",  # a sentence's first word
        "The user and Melanie went to a parade.",  # a speaker's name
        "The user asked for a gift idea, and Assistant suggested a necklace.",
    ],
)
def test_names_the_conversation_used_and_words_not_taken_for_names_are_not_invented(
    statement: str,
) -> None:
    assert invented_names(statement, SAID, names=["Caroline", "Melanie"]) == []


@pytest.mark.parametrize(
    ("statement", "said"),
    [
        ("用户搬到了上海。", ["我搬家了。"]),
        ("The user moved to Shanghai.", ["我搬到上海了。"]),  # a translation: not judged
        # Chinese by the project's rule (a quarter of the letters or more): not judged either
        ("The user moved to Shanghai.", ["I moved last year, 我搬到上海了。"]),
    ],
)
def test_chinese_and_translated_statements_are_not_judged(statement: str, said: list[str]) -> None:
    assert invented_names(statement, said) == []


@pytest.mark.parametrize(
    ("statement", "user_name"),
    [
        ("The user is a collaborator of Calvin's.", "Calvin"),
        ("The user has dogs named Audrey and Andrew.", "Audrey"),
        ("Calvin plays with calvin's band.", "Calvin"),
        ("The user's name is Calvin.", "Calvin"),
        ("用户是王芳的朋友。", "王芳"),
    ],
)
def test_a_users_fact_naming_the_user_as_someone_else_is_caught(
    statement: str, user_name: str
) -> None:
    assert names_the_user_as_another(statement, user_name)


@pytest.mark.parametrize(
    ("statement", "user_name"),
    [
        ("The user lives in Boston.", "Calvin"),
        ("Calvin is a musician.", "Calvin"),  # the opening is the user
        ("The user, Calvin, lives in Boston.", "Calvin"),  # set beside the opening
        ("用户王芳在银行上班。", "王芳"),
        ("The user studies Calvinism.", "Calvin"),  # not the whole word
        ("Pepper chewed Maya's hiking boots.", "Maya"),  # named once, as herself
        ("The user lives in Boston.", None),
    ],
)
def test_a_users_fact_not_naming_them_again_is_not_caught(
    statement: str, user_name: str | None
) -> None:
    assert not names_the_user_as_another(statement, user_name)
