"""The scripted LLM's answers for a fault run: deterministic per snapshot, faulty on demand.

* an **extraction** request (of the run's memory type: semantic, or a custom type whose memories
  are the same statements) is answered with the facts of the workload's contents found in its
  conversation, in order (the same snapshot always gets the same answer, so a re-extraction
  after a crash could not tell);
* a **reconcile** question (one, or a batch) is answered UPDATE for each new memory that is the
  next step of a chain after one of its EXISTING memories, else ADD;
* a conversation with the garble marker is always answered with garbage (poison: dead letter);
* while `garbling` is on, the *first* attempt of an extraction is garbage and the retry (which
  carries the correction) gets the right answer: the stage must retry, not dead-letter.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.support.extraction_requests import OPENINGS
from tests.support.fault.workload import GARBLE_MARKER, Workload
from tests.support.reconcile_requests import AskedQuestion, answer, decision, questions
from tests.support.scripted_llm import ScriptedLLM

GARBAGE = "Sure! Here are the facts you asked for: the user, probably."
_LINE = re.compile(r"^\[[^\]]+\]: (?P<content>.*)$")


class WorkloadLLM:
    """Answers chat requests for one workload; install it on a `ScriptedLLM` with `install`."""

    def __init__(self, workload: Workload, memory_type: str = "semantic") -> None:
        self.memory_type = memory_type
        self.statements = workload.statements
        self.links = workload.links
        self.garbling = False
        self.garbage_answers = 0

    def install(self, llm: ScriptedLLM) -> None:
        llm.on(
            lambda text: text.lstrip().startswith(("NEW:", "EXISTING:")),
            self.reconcile,
            scope="last_user",
        )
        opening = OPENINGS.get(self.memory_type, f'You extract "{self.memory_type}" memories')
        llm.on(lambda text: opening in text, self.extract)

    def extract(self, request: dict[str, Any]) -> str:
        messages = request.get("messages", [])
        conversation = str(messages[1]["content"]) if len(messages) > 1 else ""
        retry = len(messages) > 2
        if GARBLE_MARKER in conversation or (self.garbling and not retry):
            self.garbage_answers += 1
            return GARBAGE
        found = self.facts_in(conversation)
        if self.memory_type != "semantic":  # a custom type's memory: its subject and text
            return json.dumps({"memories": [{"subject": "the user", "text": s} for s in found]})
        return json.dumps({"facts": [fact(s) for s in found]})

    def facts_in(self, conversation: str) -> list[str]:
        found: list[str] = []
        for line in conversation.splitlines():
            match = _LINE.match(line.strip())
            statement = self.statements.get(match["content"]) if match else None
            if statement is not None and statement not in found:
                found.append(statement)
        return found

    def reconcile(self, request: dict[str, Any]) -> dict[str, Any]:
        question = str(request["messages"][-1]["content"])
        return answer(question, [self.decide(asked) for asked in questions(question)])

    def decide(self, asked: AskedQuestion) -> dict[str, Any]:
        for number, text in asked.options:
            if (text, asked.new) in self.links:
                return decision("UPDATE", number, "a later step of the chain")
        return decision("ADD", None, "different")


def fact(statement: str) -> dict[str, Any]:
    field = "location" if " lives in " in statement else None
    field = "employer" if " works at " in statement else field
    return {
        "subject": "the user",
        "statement": statement,
        "owner": "user",
        "category": "basic_info" if field else "preference",
        "profile_field": field,
    }
