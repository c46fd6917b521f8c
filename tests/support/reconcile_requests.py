"""Reading the reconciliation questions of `handlers.reconcile_prompt` back, for scripted models.

A scripted LLM (the tests', the benchmarks' stub and cost models) answers a reconciliation by
what it was shown: `questions` turns the user message of either prompt — one question, or a
batch — into the new memories and their numbered candidates, and `answer` wraps one decision per
question in the format that prompt asks for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from handlers.reconcile_prompt import LETTERS, OPENING

_OPTION = re.compile(r"^(?P<number>\d+)\. (?P<text>.*)$")
_NEW = re.compile(r"^(?P<letter>[A-H])\. (?P<text>.*) \(compare with (?P<numbers>[\d, ]+)\)$")


@dataclass(frozen=True)
class AskedQuestion:
    """One new memory as a reconciliation request shows it, with its numbered candidates."""

    new: str
    options: tuple[tuple[int, str], ...]


def is_reconciliation(system: str) -> bool:
    """Whether a request's system prompt is one of reconciliation's."""
    return system.startswith(OPENING)


def is_batch(question: str) -> bool:
    return question.lstrip().startswith("EXISTING:")


def questions(question: str) -> list[AskedQuestion]:
    """The new memories a reconciliation user message asks about, in order."""
    lines = question.strip().splitlines()
    if not is_batch(question):
        new = lines[0].removeprefix("NEW:").strip()
        options = [m for m in map(_OPTION.match, lines[1:]) if m]
        return [AskedQuestion(new, tuple((int(m["number"]), m["text"]) for m in options))]
    listed: dict[int, str] = {}
    asked: list[AskedQuestion] = []
    for line in lines:
        if (lettered := _NEW.match(line)) is not None:
            numbers = [int(n) for n in lettered["numbers"].split(",")]
            asked.append(AskedQuestion(lettered["text"], tuple((n, listed[n]) for n in numbers)))
        elif (option := _OPTION.match(line)) is not None:
            listed[int(option["number"])] = option["text"]
    return asked


def decision(action: str, existing: int | None, reason: str) -> dict[str, Any]:
    """One decision as both prompts ask for it (`contradicts` given for an UPDATE only)."""
    return {
        "new_info": "nothing" if action == "REINFORCE" else "new",
        "contradicts": existing if action == "UPDATE" else None,
        "action": action,
        "existing": existing,
        "reason": reason,
    }


def answer(question: str, decisions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The answer to `question`: its one decision, or the batch's decisions lettered."""
    if not is_batch(question):
        (only,) = decisions
        return only
    return {
        "decisions": [
            {"new": letter, **decided} for letter, decided in zip(LETTERS, decisions, strict=False)
        ]
    }
