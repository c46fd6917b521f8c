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

from handlers.extraction.base import DEFAULT_MAX_ANSWER_BYTES, InvalidExtraction
from handlers.extraction.json_answer import load_object
from handlers.ports import ChatAnswer, ChatModel
from handlers.reconcile import Answer, NewMemory, Option

log = logging.getLogger(__name__)

PROMPT_VERSION = "reconcile-2"

SYSTEM_PROMPT = """\
You keep a long-term memory consistent. You get one NEW memory and a numbered list of EXISTING \
memories about the same subject. Memories that look alike are often different facts that are \
all true. Compare NEW with each EXISTING memory:
- Same meaning: NEW says what that memory already says, only in other words or with less \
detail. NEW adds nothing.
- Contradiction: NEW and that memory cannot both be true now, because NEW gives another value \
for the very same thing (another city, another job or title, another number, another date for \
the same plan, the opposite preference, another setting for the same rule).

Then decide:
- "REINFORCE": NEW has the same meaning as one EXISTING memory. Give its number.
- "UPDATE": NEW contradicts one EXISTING memory and replaces it. Give its number.
- "ADD": NEW is new information and contradicts nothing; the EXISTING memories stay true \
beside it (another allergy, another pet, another hobby, another language, another relative, \
another rule, another event). When in doubt, ADD.

Answer with one JSON object, keys in this order:
{"new_info": "<what NEW says that no EXISTING memory says, or \\"nothing\\">", "contradicts": \
<number of the EXISTING memory that can no longer be true, or null>, "action": "ADD" | \
"REINFORCE" | "UPDATE", "existing": <number, or null for ADD>, "reason": "<a few words>"}

Example:
NEW: The user is afraid of spiders.
EXISTING:
1. The user is afraid of heights.
2. The user lives in Oslo.
Answer: {"new_info": "afraid of spiders", "contradicts": null, "action": "ADD", "existing": \
null, "reason": "another fear; both are true"}

Example:
NEW: The user's weekly team meeting is now on Wednesdays.
EXISTING:
1. The user collects stamps.
2. The user's weekly team meeting is on Mondays.
Answer: {"new_info": "meeting on Wednesdays, not Mondays", "contradicts": 2, "action": \
"UPDATE", "existing": 2, "reason": "the meeting day changed"}

Example:
NEW: The user's sister Ana is an airline pilot.
EXISTING:
1. The user's favourite colour is green.
2. The user has a sister, Ana, who flies planes for a living.
Answer: {"new_info": "nothing", "contradicts": null, "action": "REINFORCE", "existing": 2, \
"reason": "same job in other words"}

Example:
NEW: Always: use metric units.
EXISTING:
1. Always: reply in a friendly tone.
Answer: {"new_info": "use metric units", "contradicts": null, "action": "ADD", "existing": \
null, "reason": "another rule; both apply"}

Example:
NEW: 用户会弹钢琴。
EXISTING:
1. 用户会游泳。
Answer: {"new_info": "会弹钢琴", "contradicts": null, "action": "ADD", "existing": null, "reason": \
"another skill; both are true"}

Example:
NEW: 用户的组会改到了每周三。
EXISTING:
1. 用户的组会在每周一。
Answer: {"new_info": "组会改到周三", "contradicts": 1, "action": "UPDATE", "existing": 1, \
"reason": "the meeting day changed"}

Example:
NEW: 用户每个星期六都去图书馆。
EXISTING:
1. 用户每周六去图书馆。
Answer: {"new_info": "nothing", "contradicts": null, "action": "REINFORCE", "existing": 1, \
"reason": "same routine"}
"""

ACTIONS = ("ADD", "UPDATE", "REINFORCE")


def prompt(new: NewMemory, options: Sequence[Option]) -> list[dict[str, str]]:
    """The chat messages that ask about `new` against `options` (numbered from 1)."""
    listed = "\n".join(f"{n}. {option.memory.content.text}" for n, option in enumerate(options, 1))
    question = f"NEW: {new.content.text}\nEXISTING:\n{listed}\nAnswer with the JSON."
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]


def parse(text: str, options: Sequence[Option]) -> Answer:
    """The LLM's answer as an `Answer` naming an option's memory id; `InvalidExtraction` with
    the reason when it does not follow the format or names no option it was shown.

    An answer that contradicts itself is an ADD: an UPDATE whose `contradicts` is not the
    memory it updates (null, absent or another number), or a REINFORCE that names a memory in
    `contradicts`. Either would drop a fact the answer itself does not say is gone; an ADD at
    worst keeps a stale value or a duplicate beside it, which stays visible."""
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
    contradicts = _number(answer.get("contradicts"))
    if action == "UPDATE" and contradicts != number:
        # An UPDATE supersedes a memory the answer itself does not call contradicted: the old
        # memory may still hold, so keep both (a visible duplicate, never a lost fact).
        return Answer("ADD", reason=f"UPDATE of {number} without contradicting it: {reason}"[:300])
    if action == "REINFORCE" and contradicts is not None:
        # A REINFORCE would drop NEW although the answer says it contradicts a memory.
        return Answer("ADD", reason=f"REINFORCE while contradicting {contradicts}: {reason}"[:300])
    return Answer(action, options[number - 1].memory.memory_id, reason)  # type: ignore[arg-type]


async def ask(
    llm: ChatModel,
    new: NewMemory,
    options: Sequence[Option],
    *,
    attempts: int,
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
) -> tuple[Answer | None, list[ChatAnswer]]:
    """Ask up to `attempts` times (each retry told what was wrong); None if no answer held.
    An answer over `max_answer_bytes` is not parsed: it is invalid like any other.

    Transport errors propagate: the caller waits an unreachable LLM out."""
    messages = prompt(new, options)
    answers: list[ChatAnswer] = []
    for _ in range(attempts):
        answer = await llm.complete_json(messages)
        answers.append(answer)
        try:
            size = len(answer.text.encode())
            if size > max_answer_bytes:
                raise InvalidExtraction(
                    f"the answer is {size} bytes, more than the limit of {max_answer_bytes}"
                )
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
