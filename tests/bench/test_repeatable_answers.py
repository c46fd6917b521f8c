"""`bench/repeatable_answers.py` without a model: what it asks, and how it reads an answer."""

from __future__ import annotations

import pytest

from bench.repeatable_answers import MODES, ORDER, facts_in, main, snapshots
from memstream.runtime.llm_choice import PROMPT_CACHE, REPEATABLE


def test_the_modes_are_the_servers_command_lines() -> None:
    assert MODES == {
        "cache": PROMPT_CACHE,
        "no-cache": ("--logits_all", "false"),
        "repeatable": REPEATABLE,
    }
    assert ORDER == ("P", "Q", "P", "P")


@pytest.mark.parametrize(
    ("answer", "facts"),
    [
        ('{"facts": [{"statement": "a"}, {"statement": "b"}]}', 2),
        ('{"facts": []}', 0),
        ('{"facts": [{"statement": "a"}, {"statem', None),  # cut at the token limit
        ('{"episodes": []}', None),
        ("[]", None),
    ],
)
def test_an_answer_counts_its_facts_and_a_cut_one_none(answer: str, facts: int | None) -> None:
    assert facts_in(answer) == facts


def test_without_locomo_the_first_two_labelled_conversations_are_asked_about() -> None:
    first, second = snapshots(None, "conv-42")
    assert first.event_id != second.event_id
    assert first.turns and second.turns


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(SystemExit):
        main(["--modes", "cache,warm"])
