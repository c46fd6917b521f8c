"""The scripted model's answers in the LLM-cost benchmark, from the conversation's annotations.

`ScriptedMemoryModel` answers every request of both pipelines by what the request shows: an
extraction returns the annotated items of the exchanges it is about, a reconciliation question
(ours) or an update call (the per-message baseline) answers from the `same_as` / `replaces`
links between the new fact and the memories it is shown. Both pipelines therefore get the same,
plausible answers; what differs is how often they ask and how much they send.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.cost_conversation import Exchange, Fact
from tests.support.extraction_requests import OPENINGS
from tests.support.reconcile_requests import (
    AskedQuestion,
    answer,
    decision,
    is_reconciliation,
    questions,
)

Request = dict[str, Any]


def _fact_json(fact: Fact) -> dict[str, Any]:
    chinese = bool(re.match(r"[\u4e00-\u9fff]", fact.statement))
    subject = "assistant" if fact.statement.startswith(("The assistant", "助手")) else "the user"
    return {
        "subject": "助手" if chinese and subject == "assistant" else subject,
        "statement": fact.statement,
        "owner": "agent" if subject == "assistant" else "user",
        "category": fact.category,
        "profile_field": fact.profile_field,
    }


@dataclass
class ScriptedMemoryModel:
    """Answers both pipelines' chat requests from the annotations of `exchanges`.

    `baseline_kind(request)` names a per-message baseline request ("extract" / "update") or
    returns None; `baseline_new_part(request)` is the text of its new message pair (the recent
    context it also shows is not what it extracts from).
    """

    exchanges: Sequence[Exchange]
    baseline_kind: Callable[[Request], str | None]
    baseline_new_part: Callable[[Request], str]
    baseline_update: Callable[[Request], dict[str, Any]]
    facts_by_statement: dict[str, Fact] = field(init=False)

    def __post_init__(self) -> None:
        self.facts_by_statement = {
            fact.statement: fact for exchange in self.exchanges for fact in exchange.facts
        }

    def __call__(self, request: Request) -> str:
        """The answer's text: JSON as a model writes it (Chinese as is, not escaped)."""
        return dumps(self.answer(request))

    def answer(self, request: Request) -> dict[str, Any]:
        messages = request.get("messages", [])
        system = str(messages[0].get("content", "")) if messages else ""
        baseline = self.baseline_kind(request)
        if baseline == "extract":
            found = self.about(self.baseline_new_part(request))
            return {"facts": [fact.statement for e in found for fact in e.facts]}
        if baseline == "update":
            return self.baseline_update(request)
        if is_reconciliation(system):
            return self.reconcile(str(messages[-1].get("content", "")))
        conversation = str(messages[-1].get("content", "")) if messages else ""
        for memory_type, opening in OPENINGS.items():
            if system.startswith(opening):
                found = self.about(conversation)
                if memory_type == "semantic":
                    return {"facts": [_fact_json(f) for e in found for f in e.facts]}
                key = {"episodic": "episodes", "procedural": "procedures", "taxonomic": "terms"}
                attribute = key[memory_type]
                return {attribute: [item for e in found for item in getattr(e, attribute)]}
        return {}

    def about(self, text: str) -> list[Exchange]:
        """The exchanges whose user message appears in `text`."""
        return [exchange for exchange in self.exchanges if exchange.user in text]

    def reconcile(self, question: str) -> dict[str, Any]:
        """One reconciliation question or a batch (`tests.support.reconcile_requests`)."""
        return answer(question, [self.decide(asked) for asked in questions(question)])

    def decide(self, asked: AskedQuestion) -> dict[str, Any]:
        fact = self.facts_by_statement.get(asked.new)
        for number, text in asked.options:
            if fact is not None and fact.replaces == text.strip():
                return decision("UPDATE", number, "the value changed")
        for number, text in asked.options:
            if text.strip() == asked.new or (fact is not None and fact.same_as == text.strip()):
                return decision("REINFORCE", number, "same meaning")
        return decision("ADD", None, "new information")


def update_decisions(
    facts_by_statement: dict[str, Fact], old: Sequence[dict[str, str]], new: Sequence[str]
) -> dict[str, Any]:
    """The per-message baseline's update answer: every memory it was shown with an event (the
    format asks for the whole list back), then an ADD for each new fact that neither repeats
    nor replaces one of them."""
    answer: list[dict[str, str]] = []
    placed: set[str] = set()
    for memory in old:
        entry = {"id": memory["id"], "text": memory["text"], "event": "NONE"}
        for statement in new:
            fact = facts_by_statement.get(statement)
            if fact is not None and fact.replaces == memory["text"]:
                entry = {
                    "id": memory["id"],
                    "text": statement,
                    "event": "UPDATE",
                    "old_memory": memory["text"],
                }
                placed.add(statement)
            elif statement == memory["text"] or (
                fact is not None and fact.same_as == memory["text"]
            ):
                placed.add(statement)
        answer.append(entry)
    next_id = len(old)
    for statement in new:
        if statement not in placed:
            answer.append({"id": str(next_id), "text": statement, "event": "ADD"})
            next_id += 1
    return {"memory": answer}


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
