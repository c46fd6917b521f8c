"""Asking the LLM about an ambiguous memory: the prompt, and reading its answer strictly.

Used only for the middle similarity band (`handlers.reconcile`). The LLM sees the new memory and
the numbered candidates — all about the same subject, of the same type and scope — and answers
with one JSON object. Its answer is held to what it was shown: a number outside the list, an
unknown action or invalid JSON is asked again with the reason, and after the last attempt the
memory is simply ADDed (never a lost memory, never a wrong target).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from handlers.extraction.base import InvalidExtraction
from handlers.extraction.json_answer import load_object
from handlers.ports import ChatAnswer, ChatModel
from handlers.reconcile import Answer, NewMemory, Option

log = logging.getLogger(__name__)

PROMPT_VERSION = "reconcile-1"

SYSTEM_PROMPT = """\
You keep a long-term memory consistent. You get one NEW memory and a numbered list of EXISTING \
memories about the same subject. Decide what the new memory means for them:
- "REINFORCE": it says the same thing as one existing memory, perhaps in other words or with \
less detail. Give that memory's number.
- "UPDATE": it replaces one existing memory because the fact changed (another job, another \
city, a changed preference, a new plan instead of the old one). Give that memory's number.
- "ADD": it is a different fact; the existing memories stay true beside it.

Answer with one JSON object: {"action": "REINFORCE" | "UPDATE" | "ADD", "existing": <number, \
or null for ADD>, "reason": "<a few words>"}

Example:
NEW: The user lives in Porto.
EXISTING:
1. The user lives in Lisbon.
2. The user likes the sea.
Answer: {"action": "UPDATE", "existing": 1, "reason": "moved from Lisbon to Porto"}

Example:
NEW: The user is vegetarian and eats no meat.
EXISTING:
1. The user is a vegetarian.
Answer: {"action": "REINFORCE", "existing": 1, "reason": "same diet"}

Example:
NEW: The user plays tennis on Sundays.
EXISTING:
1. The user plays the piano.
Answer: {"action": "ADD", "existing": null, "reason": "a different hobby"}
"""

ACTIONS = ("ADD", "UPDATE", "REINFORCE")


def prompt(new: NewMemory, options: Sequence[Option]) -> list[dict[str, str]]:
    """The chat messages that ask about `new` against `options` (numbered from 1)."""
    listed = "\n".join(f"{n}. {option.memory.content.text}" for n, option in enumerate(options, 1))
    question = f"NEW: {new.content.text}\nEXISTING:\n{listed}\nAnswer with the JSON."
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]


def parse(text: str, options: Sequence[Option]) -> Answer:
    """The LLM's answer as an `Answer` naming an option's memory id; `InvalidExtraction` with
    the reason when it does not follow the format or names no option it was shown."""
    answer = load_object(text)
    action = str(answer.get("action", "")).strip().upper()
    if action not in ACTIONS:
        raise InvalidExtraction(f'"action" must be one of {", ".join(ACTIONS)}, got {action!r}')
    reason = str(answer.get("reason") or "")[:300]
    if action == "ADD":
        return Answer("ADD", reason=reason)
    number = _number(answer.get("existing"))
    if number is None or not 1 <= number <= len(options):
        raise InvalidExtraction(
            f'"existing" must be the number of one of the {len(options)} existing memories'
        )
    return Answer(action, options[number - 1].memory.memory_id, reason)  # type: ignore[arg-type]


async def ask(
    llm: ChatModel, new: NewMemory, options: Sequence[Option], *, attempts: int
) -> tuple[Answer | None, list[ChatAnswer]]:
    """Ask up to `attempts` times (each retry told what was wrong); None if no answer held.

    Transport errors propagate: the caller waits an unreachable LLM out."""
    messages = prompt(new, options)
    answers: list[ChatAnswer] = []
    for _ in range(attempts):
        answer = await llm.complete_json(messages)
        answers.append(answer)
        try:
            return parse(answer.text, options), answers
        except InvalidExtraction as exc:
            log.info("reconcile answer refused: %s", exc)
            messages = [
                *prompt(new, options),
                {"role": "assistant", "content": answer.text[:1_000]},
                {"role": "user", "content": f"That answer was invalid: {exc}. Answer again."},
            ]
    return None, answers


def _number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None
