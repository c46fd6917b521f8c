"""Asking the LLM about ambiguous memories: the prompts, strict parsing, retries, batches."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from handlers.extraction.base import InvalidExtraction
from handlers.known_memory import KnownMemory
from handlers.ports import ChatAnswer
from handlers.reconcile import Answer, NewMemory, Option, Question
from handlers.reconcile_prompt import (
    BATCH_SYSTEM_PROMPT,
    OPENING,
    SYSTEM_PROMPT,
    Batch,
    ask,
    ask_all,
    parse,
    prompt,
)
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


def _option(memory_id: str, text: str) -> Option:
    memory = KnownMemory(
        memory_id=memory_id,
        version=1,
        content=f.content(text=text),
        embedding=(1.0, 0.0),
        embedding_model="e",
    )
    return Option(memory, 0.9)


LISBON, SEA, CATS = (
    _option("m1", "The user lives in Lisbon."),
    _option("m2", "The user likes the sea."),
    _option("m3", "The user has two cats."),
)
QUESTIONS = [
    Question(NEW, (LISBON, SEA)),
    Question(NewMemory(f.content(text="The user has three cats."), (1.0, 0.0)), (CATS, SEA)),
]


def _decision(letter: str, action: str, existing: int | None) -> dict[str, object]:
    contradicts = existing if action == "UPDATE" else None
    return {"new": letter, "contradicts": contradicts, "action": action, "existing": existing}


def test_a_batch_lists_each_candidate_once_and_letters_the_new_memories() -> None:
    messages = Batch.of(QUESTIONS).messages()
    assert messages[0]["content"] == BATCH_SYSTEM_PROMPT
    assert messages[1]["content"] == (
        "EXISTING:\n1. The user lives in Lisbon.\n2. The user likes the sea.\n"
        "3. The user has two cats.\nNEW:\n"
        "A. The user lives in Porto. (compare with 1, 2)\n"
        "B. The user has three cats. (compare with 3, 2)\nAnswer with the JSON."
    )


def test_both_prompts_begin_alike_and_state_the_same_relations() -> None:
    assert SYSTEM_PROMPT.startswith(OPENING) and BATCH_SYSTEM_PROMPT.startswith(OPENING)
    relations = SYSTEM_PROMPT[SYSTEM_PROMPT.index("- Same meaning") : SYSTEM_PROMPT.index("Answer")]
    assert relations in BATCH_SYSTEM_PROMPT


def test_a_batch_answer_is_held_to_each_new_memorys_own_candidates() -> None:
    text = json.dumps({"decisions": [_decision("B", "UPDATE", 3), _decision("A", "REINFORCE", 3)]})
    found = Batch.of(QUESTIONS).parse(text)
    assert found[1] == Answer("UPDATE", "m3", "")
    assert isinstance(found[0], InvalidExtraction)  # 3 is B's candidate, not A's
    assert "one of its own numbers (1, 2)" in str(found[0])


def test_a_batch_answer_without_a_decision_for_a_letter_leaves_it_unanswered() -> None:
    found = Batch.of(QUESTIONS).parse(json.dumps({"decisions": [_decision("A", "ADD", None)]}))
    assert found[0] == Answer("ADD")
    assert str(found[1]) == "no decision was given"


def test_a_batch_answer_that_is_no_decisions_list_is_refused() -> None:
    with pytest.raises(InvalidExtraction, match="decisions"):
        Batch.of(QUESTIONS).parse('{"action": "ADD"}')


def test_questions_per_call_asks_that_many_in_one_call() -> None:
    answer = {"decisions": [_decision("A", "UPDATE", 1), _decision("B", "UPDATE", 3)]}
    llm = Scripted(json.dumps(answer))
    decided, answers = asyncio.run(ask_all(llm, QUESTIONS, attempts=3, per_call=2))
    assert decided == [Answer("UPDATE", "m1", ""), Answer("UPDATE", "m3", "")]
    assert len(llm.calls) == 1 and len(answers) == 1


def test_a_retry_takes_only_the_decisions_still_wrong() -> None:
    first = {"decisions": [_decision("A", "UPDATE", 1), _decision("B", "UPDATE", 9)]}
    second = {"decisions": [_decision("A", "ADD", None), _decision("B", "REINFORCE", 3)]}
    llm = Scripted(json.dumps(first), json.dumps(second))
    decided, answers = asyncio.run(ask_all(llm, QUESTIONS, attempts=3, per_call=2))
    assert decided == [Answer("UPDATE", "m1", ""), Answer("REINFORCE", "m3", "")]
    assert len(answers) == 2
    assert llm.calls[1][-1]["content"].startswith("That answer was invalid: B: ")


def test_a_question_never_answered_in_a_batch_is_none() -> None:
    only_a = json.dumps({"decisions": [_decision("A", "ADD", None)]})
    llm = Scripted(only_a, only_a)
    decided, _ = asyncio.run(ask_all(llm, QUESTIONS, attempts=2, per_call=2))
    assert decided == [Answer("ADD"), None]


def test_one_question_alone_is_asked_with_the_single_prompt() -> None:
    llm = Scripted('{"contradicts": 1, "action": "UPDATE", "existing": 1}')
    decided, _ = asyncio.run(ask_all(llm, QUESTIONS[:1], attempts=1))
    assert decided == [Answer("UPDATE", "m1", "")]
    assert llm.calls[0] == prompt(NEW, (LISBON, SEA))


def test_more_questions_than_one_call_carries_are_asked_in_further_calls() -> None:
    questions = [Question(NEW, (LISBON,))] * 5
    batch = {"decisions": [_decision(letter, "ADD", None) for letter in "ABC"]}
    llm = Scripted(json.dumps(batch), json.dumps(batch), '{"action": "ADD"}')
    decided, _ = asyncio.run(ask_all(llm, questions, attempts=1, per_call=2))
    assert decided == [Answer("ADD")] * 5
    assert len(llm.calls) == 3 and llm.calls[2] == prompt(NEW, (LISBON,))


def test_by_default_each_question_is_asked_alone_and_the_calls_run_at_once() -> None:
    class Overlapping:
        def __init__(self) -> None:
            self.running = 0
            self.most = 0
            self.calls: list[Sequence[dict[str, str]]] = []

        async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
            self.calls.append(messages)
            self.running += 1
            self.most = max(self.most, self.running)
            await asyncio.sleep(0.01)
            self.running -= 1
            return ChatAnswer('{"action": "ADD"}', "scripted", 30, 7)

    llm = Overlapping()
    decided, answers = asyncio.run(ask_all(llm, QUESTIONS, attempts=1))
    assert decided == [Answer("ADD"), Answer("ADD")] and len(answers) == 2
    assert [call[0]["content"] for call in llm.calls] == [SYSTEM_PROMPT, SYSTEM_PROMPT]
    assert llm.most == 2


def test_an_outage_in_one_call_reaches_the_caller_as_itself() -> None:
    class Down:
        async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
            raise ConnectionError("the LLM is down")

    with pytest.raises(ConnectionError, match="the LLM is down"):
        asyncio.run(ask_all(Down(), QUESTIONS, attempts=1))
