"""The consolidation benchmark's cases and scoring, run with scripted models (no LLM)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from bench.consolidate_eval.run import Case, evaluate, load_cases, score, summary
from handlers.consolidation_prompt import OPENING
from handlers.ports import ChatAnswer


def test_the_cases_are_well_formed_and_balanced() -> None:
    cases = load_cases()
    assert len({case.id for case in cases}) == len(cases) >= 24
    labels = [case.expected for case in cases]
    assert {label: labels.count(label) for label in set(labels)} == {
        "merge": 9,
        "supersede": 9,
        "keep": 9,
    }
    for case in cases:
        assert 2 <= len(case.memories) <= 8
        assert (case.keep is not None) == (case.expected == "supersede")
        assert case.keep is None or 1 <= case.keep <= len(case.memories)


class Oracle:
    """Answers every case as labelled (found by its memories)."""

    def __init__(self, cases: Sequence[Case]) -> None:
        self.by_text = {case.memories: case for case in cases}

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        assert messages[0]["content"].startswith(OPENING)
        listed = tuple(line.split(". ", 1)[1] for line in messages[1]["content"].splitlines()[1:-1])
        case = self.by_text[tuple(reversed(listed))]  # the prompt lists them newest first
        keep = None if case.keep is None else len(case.memories) - case.keep + 1
        answer = {"action": case.expected.upper(), "keep": keep, "text": None}
        if case.expected == "merge":
            answer.update(keep=1, text=case.memories[0])
        return ChatAnswer(json.dumps(answer), "oracle", prompt_tokens=100, completion_tokens=10)


class AlwaysMerge:
    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        return ChatAnswer('{"action": "MERGE", "keep": 1, "text": "x"}', "m")


def test_an_oracle_scores_every_case_right_and_loses_no_fact() -> None:
    cases = load_cases()
    outcomes = asyncio.run(evaluate(cases, Oracle(cases), attempts=2))
    figures = summary(outcomes)
    assert (figures["right"], figures["facts_lost"], figures["calls"]) == (27, 0, 27)
    assert figures["prompt_tokens_per_call"] == 100.0


def test_merging_everything_loses_the_keep_cases_facts() -> None:
    cases = load_cases()
    figures = summary(asyncio.run(evaluate(cases, AlwaysMerge(), attempts=1)))
    assert figures["by_label"] == {"keep": "0/9", "merge": "9/9", "supersede": "0/9"}
    assert figures["facts_lost"] == 9


def test_a_supersede_keeping_the_wrong_memory_loses_a_fact() -> None:
    case = Case("c", "supersede", 2, ("a", "b"))
    assert score(case, "supersede", 2) == (True, False)
    assert score(case, "supersede", 1) == (False, True)
    assert score(case, "keep", None) == (False, False)
