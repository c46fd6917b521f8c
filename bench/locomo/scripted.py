"""Scripting the test LLM (tests.support.scripted_llm) for a LoCoMo-format sample.

For the CI profile the whole path runs — turns through the pipeline, extraction, projection,
search, the answer and judge calls, scoring — with answers that are decided by rules, not by a
model:

- **extraction**: a semantic extraction prompt showing a session's first turn is answered with
  that session's `observation` facts from the sample itself (third-person facts the data set
  ships for every session; the pipeline still validates and attributes them);
- **reconciliation**: ADD (a new fact);
- **answer**: the gold answer when every one of its scored tokens is in the context the
  pipeline retrieved, else "not mentioned" — so the F1 measures what retrieval found;
- **judge**: CORRECT when the generated answer's F1 against the gold answer is at least 0.5.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from bench.locomo.dataset import Sample
from bench.locomo.scoring import answer_tokens, scored_gold, token_f1
from handlers.reconcile_prompt import OPENING
from tests.support.reconcile_requests import answer, decision, questions
from tests.support.scripted_llm import ScriptedLLM, last_user_text

NOT_MENTIONED = "not mentioned"
_QUESTION = re.compile(r"^Question: (?P<question>.*)$", re.MULTILINE)
_GOLD = re.compile(r"^Gold answer: (?P<gold>.*)$", re.MULTILINE)
_GENERATED = re.compile(r"^Generated answer: (?P<generated>.*)$", re.MULTILINE)


def observation_facts(sample: Sample, number: int) -> dict[str, Any]:
    """The session's observation facts as a semantic extraction answer."""
    observations = (sample.extra.get("observation") or {}).get(f"session_{number}_observation")
    facts = []
    for speaker, entries in (observations or {}).items():
        for entry in entries:
            facts.append(
                {
                    "subject": "the user" if speaker == sample.speaker_a else speaker,
                    "statement": entry[0],
                    "owner": "user",
                    "category": "other",
                    "profile_field": None,
                }
            )
    return {"facts": facts}


def script(llm: ScriptedLLM, samples: list[Sample]) -> None:
    """Register the rules for these samples (first match wins, in this order)."""
    gold = {qa.question: qa for sample in samples for qa in sample.qa}

    def answer(request: dict[str, Any]) -> str:
        text = last_user_text(request)
        match = _QUESTION.search(text)
        qa = gold.get(match["question"].strip()) if match else None
        if qa is None:
            return NOT_MENTIONED
        context = set(answer_tokens(text.split("\nQuestion: ")[0]))
        expected = scored_gold(qa)
        return expected if set(answer_tokens(expected)) <= context else NOT_MENTIONED

    def judge(request: dict[str, Any]) -> dict[str, str]:
        text = last_user_text(request)
        gold_match, generated_match = _GOLD.search(text), _GENERATED.search(text)
        if gold_match is None or generated_match is None:
            return {"label": "WRONG"}
        f1 = token_f1(generated_match["generated"], gold_match["gold"])
        return {"label": "CORRECT" if f1 >= 0.5 else "WRONG"}

    llm.on(lambda text: "Gold answer:" in text and "Generated answer:" in text, judge)
    llm.on(lambda text: "Context:" in text and "Question:" in text, answer)
    llm.on(OPENING, reconciled)
    for sample in samples:
        for session in sample.sessions:
            first = session.turns[0].content if session.turns else ""
            facts = observation_facts(sample, session.number)
            llm.on(_extraction_of(first), facts)


def reconciled(request: dict[str, Any]) -> dict[str, Any]:
    """Every new memory of a reconciliation question is new: ADD."""
    question = last_user_text(request)
    return answer(question, [decision("ADD", None, "new") for _ in questions(question)])


def _extraction_of(first_turn: str) -> Callable[[str], bool]:
    """Matches a semantic extraction prompt showing the session that starts with this turn."""
    return lambda text: '"facts"' in text and first_turn in text
