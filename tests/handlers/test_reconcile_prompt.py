"""Asking the LLM about an ambiguous memory: the prompt, strict parsing, retries."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from handlers.extraction.base import InvalidExtraction
from handlers.ports import ChatAnswer
from handlers.reconcile import Answer, KnownMemory, NewMemory, Option
from handlers.reconcile_prompt import ask, parse, prompt
from tests import factories as f

OPTIONS = [
    Option(
        KnownMemory(
            memory_id=f"m{n}",
            version=1,
            content=f.content(text=text),
            embedding=(1.0, 0.0),
            embedding_model="e",
        ),
        0.9,
    )
    for n, text in enumerate(["The user lives in Lisbon.", "The user likes the sea."], 1)
]
NEW = NewMemory(f.content(text="The user lives in Porto."), (1.0, 0.0))


def test_the_prompt_numbers_the_candidates_under_the_new_memory() -> None:
    messages = prompt(NEW, OPTIONS)
    assert messages[0]["role"] == "system" and "REINFORCE" in messages[0]["content"]
    assert messages[1]["content"] == (
        "NEW: The user lives in Porto.\nEXISTING:\n1. The user lives in Lisbon.\n"
        "2. The user likes the sea.\nAnswer with the JSON."
    )


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            {
                "new_info": "Porto",
                "contradicts": 1,
                "action": "UPDATE",
                "existing": 1,
                "reason": "?",
            },
            Answer("UPDATE", "m1", "?"),
        ),
        ({"action": "UPDATE", "existing": 1, "contradicts": "1"}, Answer("UPDATE", "m1", "")),
        ({"action": "reinforce", "existing": "2"}, Answer("REINFORCE", "m2", "")),
        ({"contradicts": None, "action": "REINFORCE", "existing": 2}, Answer("REINFORCE", "m2")),
        ({"action": "ADD", "existing": None, "reason": "new"}, Answer("ADD", None, "new")),
        ({"action": "ADD", "existing": None, "contradicts": 1}, Answer("ADD", None, "")),
    ],
)
def test_a_valid_answer_names_a_shown_memory(answer: dict[str, object], expected: Answer) -> None:
    assert parse(json.dumps(answer), OPTIONS) == expected


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"contradicts": None, "action": "UPDATE", "existing": 1}, "UPDATE of 1 without contradic"),
        ({"action": "UPDATE", "existing": 1, "reason": "moved"}, "UPDATE of 1 without contradic"),
        ({"contradicts": 2, "action": "UPDATE", "existing": 1}, "UPDATE of 1 without contradic"),
        ({"contradicts": 1, "action": "REINFORCE", "existing": 1}, "REINFORCE while contradicting"),
    ],
)
def test_an_answer_that_contradicts_itself_is_an_add(
    answer: dict[str, object], reason: str
) -> None:
    parsed = parse(json.dumps(answer), OPTIONS)
    assert parsed.action == "ADD" and parsed.target is None
    assert parsed.reason.startswith(reason)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not json", "not valid JSON"),
        ('{"action": "DELETE"}', '"action" must be one of'),
        ('{"action": "UPDATE", "existing": 3}', "one of the 2 existing memories"),
        ('{"action": "UPDATE", "existing": true}', "one of the 2 existing memories"),
        ('{"action": "REINFORCE"}', "one of the 2 existing memories"),
    ],
)
def test_an_answer_outside_what_was_shown_is_refused_with_the_reason(
    text: str, reason: str
) -> None:
    with pytest.raises(InvalidExtraction, match=reason):
        parse(text, OPTIONS)


class Scripted:
    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.calls: list[list[dict[str, str]]] = []

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        self.calls.append(list(messages))
        return ChatAnswer(self.texts.pop(0), "scripted", 30, 7)


def test_an_invalid_answer_is_asked_again_with_the_reason() -> None:
    llm = Scripted(
        '{"contradicts": 9, "action": "UPDATE", "existing": 9}',
        '{"contradicts": 1, "action": "UPDATE", "existing": 1}',
    )
    answer, answers = asyncio.run(ask(llm, NEW, OPTIONS, attempts=3))
    assert answer == Answer("UPDATE", "m1", "")
    assert len(answers) == 2
    assert "one of the 2 existing memories" in llm.calls[1][-1]["content"]


def test_no_usable_answer_after_the_attempts_is_none() -> None:
    llm = Scripted("nope", "nope")
    answer, answers = asyncio.run(ask(llm, NEW, OPTIONS, attempts=2))
    assert answer is None and len(answers) == 2


def test_an_answer_over_the_size_limit_is_not_parsed_and_asked_again() -> None:
    valid = '{"contradicts": 1, "action": "UPDATE", "existing": 1}'
    llm = Scripted(valid + " " * 2_000, valid)
    answer, answers = asyncio.run(ask(llm, NEW, OPTIONS, attempts=3, max_answer_bytes=1_000))
    assert answer == Answer("UPDATE", "m1", "") and len(answers) == 2
    assert "more than the limit of 1000" in llm.calls[1][-1]["content"]
