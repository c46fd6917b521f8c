"""Asking the LLM about ambiguous memories: the prompts, and reading the answers strictly.

Used only for the middle similarity band (`handlers.reconcile`). One question (one new memory
and its numbered candidates — all about the same subject, of the same type and scope) is asked
with `SYSTEM_PROMPT` and answered with one JSON object; the questions of one source, when there
are several, are asked together in one call with `BATCH_SYSTEM_PROMPT` (the candidates of all of
them numbered in one list, each new memory lettered and told which numbers are its own) and
answered with one decision per letter (docs/architecture.md, "Reconciliation"). An answer is held
to what it was shown: a number outside the question's own candidates, an unknown action or
invalid JSON is asked again with the reason (in a batch, only the questions still unanswered),
and after the last attempt the memory is simply ADDed (never a lost memory, never a wrong
target).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from handlers.extraction.base import (
    DEFAULT_MAX_ANSWER_BYTES,
    InvalidExtraction,
    asked_again,
    refuse_oversized,
)
from handlers.extraction.json_answer import load_object
from handlers.known_memory import KnownMemory
from handlers.ports import ChatAnswer, ChatModel
from handlers.reconcile import Answer, NewMemory, Option, Question

log = logging.getLogger(__name__)

PROMPT_VERSION = "reconcile-2"
BATCH_PROMPT_VERSION = "reconcile-batch-1"

OPENING = "You keep a long-term memory consistent."
"""How both system prompts begin (scripted models in tests recognise a reconciliation by it)."""

_RELATIONS = """\
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
"""

SYSTEM_PROMPT = f"""\
{OPENING} You get one NEW memory and a numbered list of EXISTING memories about the same \
subject. Memories that look alike are often different facts that are all true. Compare NEW with \
each EXISTING memory:
{_RELATIONS}
Answer with one JSON object, keys in this order:
{{"new_info": "<what NEW says that no EXISTING memory says, or \\"nothing\\">", "contradicts": \
<number of the EXISTING memory that can no longer be true, or null>, "action": "ADD" | \
"REINFORCE" | "UPDATE", "existing": <number, or null for ADD>, "reason": "<a few words>"}}

Example:
NEW: The user is afraid of spiders.
EXISTING:
1. The user is afraid of heights.
2. The user lives in Oslo.
Answer: {{"new_info": "afraid of spiders", "contradicts": null, "action": "ADD", "existing": \
null, "reason": "another fear; both are true"}}

Example:
NEW: The user's weekly team meeting is now on Wednesdays.
EXISTING:
1. The user collects stamps.
2. The user's weekly team meeting is on Mondays.
Answer: {{"new_info": "meeting on Wednesdays, not Mondays", "contradicts": 2, "action": \
"UPDATE", "existing": 2, "reason": "the meeting day changed"}}

Example:
NEW: The user's sister Ana is an airline pilot.
EXISTING:
1. The user's favourite colour is green.
2. The user has a sister, Ana, who flies planes for a living.
Answer: {{"new_info": "nothing", "contradicts": null, "action": "REINFORCE", "existing": 2, \
"reason": "same job in other words"}}

Example:
NEW: Always: use metric units.
EXISTING:
1. Always: reply in a friendly tone.
Answer: {{"new_info": "use metric units", "contradicts": null, "action": "ADD", "existing": \
null, "reason": "another rule; both apply"}}

Example:
NEW: 用户会弹钢琴。
EXISTING:
1. 用户会游泳。
Answer: {{"new_info": "会弹钢琴", "contradicts": null, "action": "ADD", "existing": null, \
"reason": "another skill; both are true"}}

Example:
NEW: 用户的组会改到了每周三。
EXISTING:
1. 用户的组会在每周一。
Answer: {{"new_info": "组会改到周三", "contradicts": 1, "action": "UPDATE", "existing": 1, \
"reason": "the meeting day changed"}}

Example:
NEW: 用户每个星期六都去图书馆。
EXISTING:
1. 用户每周六去图书馆。
Answer: {{"new_info": "nothing", "contradicts": null, "action": "REINFORCE", "existing": 1, \
"reason": "same routine"}}
"""

BATCH_SYSTEM_PROMPT = f"""\
{OPENING} You get a numbered list of EXISTING memories and several NEW memories, lettered A, B, \
C and so on. After each NEW memory, "compare with" names the EXISTING memories about its \
subject. Memories that look alike are often different facts that are all true. Decide for each \
NEW memory on its own, comparing it only with the EXISTING memories named after it:
{_RELATIONS}
Answer with one JSON object: {{"decisions": [...]}}, one decision per NEW memory in letter \
order, each with keys in this order:
{{"new": "<its letter>", "new_info": "<what it says that no EXISTING memory says, or \
\\"nothing\\">", "contradicts": <number of the EXISTING memory that can no longer be true, or \
null>, "action": "ADD" | "REINFORCE" | "UPDATE", "existing": <number, or null for ADD>, \
"reason": "<a few words>"}}

Example:
EXISTING:
1. The user is afraid of heights.
2. The user's weekly team meeting is on Mondays.
3. The user has a sister, Ana, who flies planes for a living.
4. The user collects stamps.
NEW:
A. The user is afraid of spiders. (compare with 1)
B. The user's weekly team meeting is now on Wednesdays. (compare with 2, 4)
C. The user's sister Ana is an airline pilot. (compare with 3)
Answer: {{"decisions": [{{"new": "A", "new_info": "afraid of spiders", "contradicts": null, \
"action": "ADD", "existing": null, "reason": "another fear; both are true"}}, {{"new": "B", \
"new_info": "meeting on Wednesdays, not Mondays", "contradicts": 2, "action": "UPDATE", \
"existing": 2, "reason": "the meeting day changed"}}, {{"new": "C", "new_info": "nothing", \
"contradicts": null, "action": "REINFORCE", "existing": 3, "reason": "same job in other \
words"}}]}}

Example:
EXISTING:
1. 用户会游泳。
2. 用户的组会在每周一。
3. 用户每周六去图书馆。
NEW:
A. 用户会弹钢琴。 (compare with 1)
B. 用户每个星期六都去图书馆。 (compare with 3)
C. 用户的组会改到了每周三。 (compare with 2)
Answer: {{"decisions": [{{"new": "A", "new_info": "会弹钢琴", "contradicts": null, "action": \
"ADD", "existing": null, "reason": "another skill; both are true"}}, {{"new": "B", "new_info": \
"nothing", "contradicts": null, "action": "REINFORCE", "existing": 3, "reason": "same \
routine"}}, {{"new": "C", "new_info": "组会改到周三", "contradicts": 2, "action": "UPDATE", \
"existing": 2, "reason": "the meeting day changed"}}]}}
"""

ACTIONS = ("ADD", "UPDATE", "REINFORCE")


def prompt(new: NewMemory, options: Sequence[Option]) -> list[dict[str, str]]:
    """The chat messages that ask about `new` against `options` (numbered from 1)."""
    listed = "\n".join(f"{n}. {option.memory.content.text}" for n, option in enumerate(options, 1))
    question = f"NEW: {new.content.text}\nEXISTING:\n{listed}\nAnswer with the JSON."
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]


@dataclass(frozen=True)
class Batch:
    """Several questions as one call shows them: every candidate once in one numbered list, each
    question lettered with the numbers of its own candidates."""

    questions: tuple[Question, ...]
    listed: tuple[KnownMemory, ...]
    numbers: tuple[dict[int, Option], ...]
    """Per question: the list numbers of its candidates, and the option each stands for."""

    @classmethod
    def of(cls, questions: Sequence[Question]) -> Batch:
        if not 1 <= len(questions) <= len(LETTERS):
            raise ValueError(f"a batch holds 1 to {len(LETTERS)} questions")
        position: dict[str, int] = {}
        listed: list[KnownMemory] = []
        numbers: list[dict[int, Option]] = []
        for question in questions:
            own: dict[int, Option] = {}
            for option in question.options:
                memory = option.memory
                if memory.memory_id not in position:
                    listed.append(memory)
                    position[memory.memory_id] = len(listed)
                own[position[memory.memory_id]] = option
            numbers.append(own)
        return cls(tuple(questions), tuple(listed), tuple(numbers))

    def messages(self) -> list[dict[str, str]]:
        """The chat messages that ask every question of the batch."""
        existing = "\n".join(f"{n}. {m.content.text}" for n, m in enumerate(self.listed, 1))
        news = "\n".join(
            f"{letter}. {question.new.content.text} (compare with {', '.join(map(str, own))})"
            for letter, question, own in zip(LETTERS, self.questions, self.numbers, strict=False)
        )
        question = f"EXISTING:\n{existing}\nNEW:\n{news}\nAnswer with the JSON."
        return [
            {"role": "system", "content": BATCH_SYSTEM_PROMPT},
            {"role": "user", "content": question},
        ]

    def parse(self, text: str) -> dict[int, Answer | InvalidExtraction]:
        """Each question's decision in `text` (by its index), or why it has none; the whole
        answer is `InvalidExtraction` when it is not a decisions list at all."""
        decisions = load_object(text).get("decisions")
        if not isinstance(decisions, list):
            raise InvalidExtraction('the answer must be {"decisions": [...]}')
        found: dict[int, Answer | InvalidExtraction] = {}
        for item in decisions:
            if not isinstance(item, dict):
                continue
            letter = str(item.get("new", "")).strip().upper()
            index = LETTERS.find(letter) if len(letter) == 1 else -1
            if not 0 <= index < len(self.questions) or index in found:
                continue
            own = self.numbers[index]
            try:
                found[index] = _decision(item, own, f"one of its own numbers ({_listed(own)})")
            except InvalidExtraction as exc:
                found[index] = exc
        for index in range(len(self.questions)):
            found.setdefault(index, InvalidExtraction("no decision was given"))
        return found


LETTERS = "ABCDEFGH"
"""How the new memories of one batched call are named (so eight questions per call at most)."""


def parse(text: str, options: Sequence[Option]) -> Answer:
    """The LLM's answer as an `Answer` naming an option's memory id; `InvalidExtraction` with
    the reason when it does not follow the format or names no option it was shown.

    An answer that contradicts itself is an ADD: an UPDATE whose `contradicts` is not the
    memory it updates (null, absent or another number), or a REINFORCE that names a memory in
    `contradicts`. Either would drop a fact the answer itself does not say is gone; an ADD at
    worst keeps a stale value or a duplicate beside it, which stays visible."""
    shown = dict(enumerate(options, 1))
    return _decision(
        load_object(text), shown, f"the number of one of the {len(options)} existing memories"
    )


def _decision(answer: Mapping[str, Any], shown: Mapping[int, Option], expected: str) -> Answer:
    """One decision object held to the options `shown` (by their numbers); see `parse`."""
    action = str(answer.get("action", "")).strip().upper()
    if action not in ACTIONS:
        raise InvalidExtraction(f'"action" must be one of {", ".join(ACTIONS)}, got {action!r}')
    reason = str(answer.get("reason") or "")[:300]
    if action == "ADD":
        return Answer("ADD", reason=reason)
    number = _number(answer.get("existing"))
    if number is None or number not in shown:
        raise InvalidExtraction(f'"existing" must be {expected}')
    contradicts = _number(answer.get("contradicts"))
    if action == "UPDATE" and contradicts != number:
        # An UPDATE supersedes a memory the answer itself does not call contradicted: the old
        # memory may still hold, so keep both (a visible duplicate, never a lost fact).
        return Answer("ADD", reason=f"UPDATE of {number} without contradicting it: {reason}"[:300])
    if action == "REINFORCE" and contradicts is not None:
        # A REINFORCE would drop NEW although the answer says it contradicts a memory.
        return Answer("ADD", reason=f"REINFORCE while contradicting {contradicts}: {reason}"[:300])
    return Answer(action, shown[number].memory.memory_id, reason)  # type: ignore[arg-type]


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
            refuse_oversized(answer.text, max_answer_bytes)
            return parse(answer.text, options), answers
        except InvalidExtraction as exc:
            log.info("reconcile answer refused: %s", exc)
            messages = asked_again(prompt(new, options), answer.text, exc)
    return None, answers


async def ask_all(
    llm: ChatModel,
    questions: Sequence[Question],
    *,
    attempts: int,
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    per_call: int = 1,
) -> tuple[list[Answer | None], list[ChatAnswer]]:
    """The answers to independent questions (one wave of a source, `handlers.reconcile`), in
    order, and the LLM answers they took: `per_call` questions per call (one alone is asked with
    `ask`, more with the batched prompt, each retry told which decisions were wrong and only
    those taken from it), the calls made at once (the caller's model bounds how many run).

    Transport errors propagate (the other calls are cancelled): the caller waits an
    unreachable LLM out."""
    if not 1 <= per_call <= len(LETTERS):
        raise ValueError(f"per_call must be between 1 and {len(LETTERS)}")
    chunks = [questions[start : start + per_call] for start in range(0, len(questions), per_call)]
    calls = [
        asyncio.ensure_future(_ask_chunk(llm, chunk, attempts, max_answer_bytes))
        for chunk in chunks
    ]
    try:
        asked = await asyncio.gather(*calls)
    except BaseException:
        for call in calls:
            call.cancel()
        raise
    decided: list[Answer | None] = []
    answers: list[ChatAnswer] = []
    for answered, given in asked:
        decided.extend(answered)
        answers.extend(given)
    return decided, answers


async def _ask_chunk(
    llm: ChatModel, chunk: Sequence[Question], attempts: int, max_answer_bytes: int
) -> tuple[list[Answer | None], list[ChatAnswer]]:
    if len(chunk) == 1:
        (only,) = chunk
        answer, given = await ask(
            llm, only.new, only.options, attempts=attempts, max_answer_bytes=max_answer_bytes
        )
        return [answer], given
    return await _ask_batch(llm, Batch.of(chunk), attempts, max_answer_bytes)


async def _ask_batch(
    llm: ChatModel, batch: Batch, attempts: int, max_answer_bytes: int
) -> tuple[list[Answer | None], list[ChatAnswer]]:
    messages = batch.messages()
    settled: dict[int, Answer] = {}
    answers: list[ChatAnswer] = []
    for _ in range(attempts):
        answer = await llm.complete_json(messages)
        answers.append(answer)
        try:
            refuse_oversized(answer.text, max_answer_bytes)
            found = batch.parse(answer.text)
        except InvalidExtraction as exc:
            problem = str(exc)
        else:
            for index, decision in found.items():
                if index not in settled and isinstance(decision, Answer):
                    settled[index] = decision
            wrong = [
                f"{LETTERS[index]}: {decision}"
                for index, decision in sorted(found.items())
                if index not in settled and isinstance(decision, InvalidExtraction)
            ]
            if not wrong:
                break
            problem = "; ".join(wrong)
        log.info("reconcile answer refused: %s", problem)
        messages = [
            *batch.messages(),
            {"role": "assistant", "content": answer.text[:4_000]},
            {
                "role": "user",
                "content": f"That answer was invalid: {problem}. Answer again with every decision.",
            },
        ]
    return [settled.get(index) for index in range(len(batch.questions))], answers


def _listed(own: Mapping[int, Option]) -> str:
    return ", ".join(map(str, own))


def _number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None
