"""Pleasantries: a conversation of greetings and thanks alone is not sent to the LLM."""

from __future__ import annotations

import pytest

from handlers.extraction.pleasantries import is_pleasantry, only_pleasantries
from handlers.extraction.transcript import transcript_of
from tests.factories import snapshot


@pytest.mark.parametrize(
    "said",
    [
        "Hi! How's it going?",
        "Hey, I'm good, thanks! You?",
        "Thanks, Caroline!",
        "好的，谢谢！",
        "挺好的，谢谢！你呢？",
        "我也很好，谢谢！",
        "bye, see you soon",
    ],
)
def test_greetings_thanks_and_goodbyes_are_pleasantries(said: str) -> None:
    assert is_pleasantry(said, ["Caroline"])


@pytest.mark.parametrize(
    "said",
    [
        "Hi! I went to a support group yesterday.",
        "Thanks! My daughter loved the pottery class.",
        "我下周去北京",
        "我也去北京",
        "Good to see you, I'm swamped with the kids and work.",
    ],
)
def test_a_message_with_anything_more_is_not(said: str) -> None:
    assert not is_pleasantry(said, ["Caroline"])


def test_a_conversation_is_only_pleasantries_when_every_persons_message_is() -> None:
    quiet = snapshot(
        [
            {"content": "Hi Mel!", "name": "Caroline"},
            {"role": "assistant", "name": "Mel", "content": "Hey Caroline! How are you?"},
            {"content": "Good thanks, and you?", "name": "Caroline"},
        ]
    )
    assert only_pleasantries(transcript_of(quiet))
    told = snapshot([{"content": "Hi!"}, {"content": "I adopted a cat last week."}])
    assert not only_pleasantries(transcript_of(told))
