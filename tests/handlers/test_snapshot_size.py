"""The token estimate the window's `max_tokens` budget counts with (`handlers.snapshot_size`)."""

from __future__ import annotations

import pytest

from handlers.snapshot_size import TURN_OVERHEAD_TOKENS, estimated_text_tokens, turn_tokens
from tests import factories as f


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("a", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("I work at Stripe.", 5),
        ("我在柏林工作", 6),
        ("Berlin 柏林", 4),  # 7 ASCII characters: 2, and 2 others
        ("café", 2),  # 3 ASCII characters: 1, and the accented letter: 1
    ],
)
def test_ascii_counts_a_token_per_four_characters_and_any_other_character_one(
    text: str, tokens: int
) -> None:
    assert estimated_text_tokens(text) == tokens


def test_a_turn_counts_its_content_its_name_and_its_markers() -> None:
    anonymous = f.snapshot_turn(content="abcdabcd")
    named = f.snapshot_turn(content="abcdabcd", name="Tim")
    assert turn_tokens(anonymous) == TURN_OVERHEAD_TOKENS + 2
    assert turn_tokens(named) == TURN_OVERHEAD_TOKENS + 3  # "abcdabcdTim": 11 characters


def test_the_estimate_depends_on_the_text_alone() -> None:
    first = f.snapshot_turn(content="the same words")
    again = f.snapshot_turn(content="the same words", role="assistant")
    assert turn_tokens(first) == turn_tokens(again)
