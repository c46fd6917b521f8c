"""What every extractor does to a drafted text: the third-person part of a half-copied one."""

from __future__ import annotations

import pytest

from handlers.extraction.drafts import third_person_part


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "The user's router drops the wifi every evening and I have to restart it.",
            "The user's router drops the wifi every evening.",
        ),
        (
            "The user can't log in since the update, it says my password is wrong.",
            "The user can't log in since the update.",
        ),
        ("用户的手机屏幕从昨天开始一直闪烁，我重启也没用。", "用户的手机屏幕从昨天开始一直闪烁。"),
        ("The user keeps bees.", "The user keeps bees."),
    ],
)
def test_the_part_before_the_first_person_is_kept_as_a_sentence(text: str, kept: str) -> None:
    assert third_person_part(text) == kept


@pytest.mark.parametrize(
    "text", ["I think plants eat soil.", "The user says my", "We always book aisle seats."]
)
def test_too_little_before_the_first_person_is_nothing(text: str) -> None:
    assert third_person_part(text) is None
