"""Reading an extractor's JSON answer: strict, but for the items a cut-short answer completed."""

from __future__ import annotations

import json

import pytest

from handlers.extraction.base import InvalidExtraction
from handlers.extraction.json_answer import completed_before_cut, items_under, load_object

FIRST = {"subject": "the user", "statement": "The user works at Stripe."}
SECOND = {"subject": "the user", "statement": "The user has a beagle."}
WHOLE = json.dumps({"facts": [FIRST, SECOND, FIRST]})


def test_a_whole_answer_gives_every_item_as_written() -> None:
    assert items_under(WHOLE, "facts") == [FIRST, SECOND, FIRST]


def test_a_fenced_answer_is_read() -> None:
    assert items_under(f"```json\n{WHOLE}\n```", "facts") == [FIRST, SECOND, FIRST]


@pytest.mark.parametrize("cut", [1, 10, 20, 30, 45])
def test_an_answer_cut_inside_its_second_item_gives_the_first(cut: int) -> None:
    whole = json.dumps({"facts": [FIRST, SECOND]})
    second_starts = whole.index(json.dumps(SECOND))
    assert items_under(whole[: second_starts + cut], "facts") == [FIRST]


def test_an_answer_cut_inside_a_fenced_block_is_read() -> None:
    whole = json.dumps({"facts": [FIRST, SECOND]})
    assert items_under("```json\n" + whole[:-20], "facts") == [FIRST]


def test_the_item_being_written_at_the_cut_is_dropped_even_if_its_fields_look_whole() -> None:
    """`{"a": 1}` then the cut before `,` or `]`: whether more fields followed cannot be known."""
    whole = json.dumps({"facts": [FIRST, SECOND]})
    assert items_under(whole[:-2], "facts") == [FIRST]


def test_an_answer_cut_before_completing_an_item_is_invalid() -> None:
    whole = json.dumps({"facts": [FIRST]})
    with pytest.raises(InvalidExtraction, match="not valid JSON"):
        items_under(whole[:30], "facts")


def test_an_answer_malformed_before_its_end_is_invalid() -> None:
    broken = '{"facts": [' + json.dumps(FIRST) + ", }, " + json.dumps(SECOND)
    with pytest.raises(InvalidExtraction, match="not valid JSON"):
        items_under(broken, "facts")
    assert completed_before_cut(broken) == {}


def test_prose_is_invalid_and_nothing_is_completed() -> None:
    with pytest.raises(InvalidExtraction):
        items_under("Sure! The user works at Stripe.", "facts")
    assert completed_before_cut("Sure! The user works at Stripe.") == {}


def test_a_cut_answer_under_another_key_gives_nothing_under_this_one() -> None:
    whole = json.dumps({"episodes": [FIRST, SECOND]})
    with pytest.raises(InvalidExtraction):
        items_under(whole[:-5], "facts")


def test_load_object_stays_strict_for_a_cut_answer() -> None:
    with pytest.raises(InvalidExtraction, match="not valid JSON"):
        load_object(WHOLE[:-5])


def test_a_cut_answer_with_an_integer_past_64_bits_is_read() -> None:
    whole = '{"facts": [{"subject": "the user", "n": 1180591620717411303424}, {"subject": "x"}]}'
    assert items_under(whole[:-5], "facts") == [
        {"subject": "the user", "n": 1180591620717411303424}
    ]
