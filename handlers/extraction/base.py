"""Running one extractor over a snapshot: prompt, validate, retry, or give up with the reason."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from events.memories import MemoryContent, MemoryType
from events.snapshots import SnapshotPromoted
from handlers.ports import ChatAnswer, ChatModel

DEFAULT_MAX_MEMORIES = 50
"""Memories one extraction answer may carry by default: a 20-turn snapshot rarely holds more
than 20; hundreds are a model repeating itself."""
DEFAULT_MAX_ANSWER_BYTES = 200_000
"""Bytes of an answer parsed by default: ~50 times what `llm.max_tokens` (1,024) produces."""


@dataclass(frozen=True)
class ExtractionLimits:
    """What one LLM answer may be (docs/architecture.md, "Operations"): beyond either limit it
    is an invalid answer like any other — retried with the reason, then dead-lettered."""

    max_memories: int = DEFAULT_MAX_MEMORIES
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    turns_per_call: int | None = None
    """At most this many turns of a snapshot in one call of the types in `SPLIT_TYPES` (None:
    the whole snapshot in one call); see `snapshot_parts`."""


SPLIT_TYPES: frozenset[MemoryType] = frozenset({"semantic"})
"""The memory types whose extraction a long snapshot is split for (`turns_per_call`): facts are
found turn by turn, so a part loses none; an episode can span the whole snapshot."""


def snapshot_parts(
    snapshot: SnapshotPromoted, turns_per_call: int | None
) -> list[SnapshotPromoted]:
    """The snapshot as consecutive parts of at most `turns_per_call` turns, in order (the whole
    snapshot when it is no longer). Each part keeps the snapshot's ids and times, so what is
    extracted from it is attributed to the snapshot; a pure function, so a replay splits alike.

    Why: the packaged 1.5B model, given a whole session, lists a few facts and then repeats one;
    given eight turns at a time it found twice the facts on a development conversation, though
    the answers did not improve (docs/architecture.md, "Operations")."""
    turns = snapshot.turns
    if turns_per_call is None or len(turns) <= turns_per_call:
        return [snapshot]
    return [
        snapshot.model_copy(update={"turns": turns[start : start + turns_per_call]})
        for start in range(0, len(turns), turns_per_call)
    ]


class InvalidExtraction(ValueError):
    """The LLM's answer is not what the extractor's schema allows; the message says why."""


class Extractor(Protocol):
    """Finds one kind of knowledge in a whole snapshot."""

    memory_type: MemoryType
    prompt_version: str
    """Names the prompt and parsing rules: recorded on every memory event they produce."""

    def worth_asking(self, snapshot: SnapshotPromoted) -> bool:
        """False when the snapshot cannot hold this kind of knowledge whatever the LLM answers
        (its parsing would keep nothing): then no LLM call is made. A pure function of the
        snapshot, so a replay decides the same."""
        ...

    def prompt(self, snapshot: SnapshotPromoted) -> list[dict[str, str]]:
        """The chat messages that ask the LLM for this extractor's kind of knowledge."""
        ...

    def parse(self, answer: str, snapshot: SnapshotPromoted) -> list[MemoryContent]:
        """Validate the LLM's answer into memories; raise `InvalidExtraction` if unusable."""
        ...


@dataclass(frozen=True)
class ExtractionOutcome:
    """The memories found, or (when `failure` is set) why the snapshot must be dead-lettered."""

    memories: tuple[MemoryContent, ...]
    attempts: int
    failure: str | None = None
    last_answer: str = ""
    answers: tuple[ChatAnswer, ...] = ()
    """Every answer the LLM gave, in order (for cost accounting and failure reports)."""


async def extract(
    extractor: Extractor,
    snapshot: SnapshotPromoted,
    llm: ChatModel,
    *,
    attempts: int = 3,
    limits: ExtractionLimits = ExtractionLimits(),
) -> ExtractionOutcome:
    """Ask the LLM up to `attempts` times; each retry is told what was wrong with the last answer.

    Transport errors (LLM unreachable) propagate: the caller retries those without consuming the
    snapshot, so an outage never turns into dead letters. A snapshot the extractor does not find
    worth asking about costs no call: no memories, 0 attempts.

    A snapshot longer than `limits.turns_per_call` is asked about part by part
    (`snapshot_parts`, types in `SPLIT_TYPES`): the memories of every part, each once, or the
    first part's failure (the snapshot is one decision: all of it or none). The parts are asked
    at once (the LLM port bounds the calls in flight); an outage in one cancels the others and
    propagates.
    """
    split = extractor.memory_type in SPLIT_TYPES
    parts = snapshot_parts(snapshot, limits.turns_per_call if split else None)
    if len(parts) == 1:
        return await _extract_whole(extractor, snapshot, llm, attempts=attempts, limits=limits)
    asked = [
        asyncio.ensure_future(
            _extract_whole(extractor, part, llm, attempts=attempts, limits=limits)
        )
        for part in parts
    ]
    try:
        outcomes = await asyncio.gather(*asked)
    except BaseException:  # an outage in one part: the others' answers would be dropped anyway
        for task in asked:
            task.cancel()
        await asyncio.gather(*asked, return_exceptions=True)
        raise
    return _merged(outcomes)


def _merged(outcomes: Sequence[ExtractionOutcome]) -> ExtractionOutcome:
    """One outcome of a snapshot's parts: their memories in order, each (subject, text) once, or
    the first failure with which part it was."""
    attempts = sum(outcome.attempts for outcome in outcomes)
    answers = tuple(answer for outcome in outcomes for answer in outcome.answers)
    for index, outcome in enumerate(outcomes, start=1):
        if outcome.failure is not None:
            failure = f"part {index} of {len(outcomes)}: {outcome.failure}"
            return ExtractionOutcome((), attempts, failure, outcome.last_answer, answers)
    memories = distinct([memory for outcome in outcomes for memory in outcome.memories])
    return ExtractionOutcome(memories, attempts, answers=answers)


def distinct(memories: Sequence[MemoryContent]) -> tuple[MemoryContent, ...]:
    """`memories` in order, each (subject, text) once, case aside: the same memory listed twice
    in an answer is one memory, reconciled once (twice, its decisions would share an id)."""
    found: dict[tuple[str, str], MemoryContent] = {}
    for memory in memories:
        found.setdefault((memory.subject.casefold(), memory.text.casefold()), memory)
    return tuple(found.values())


async def _extract_whole(
    extractor: Extractor,
    snapshot: SnapshotPromoted,
    llm: ChatModel,
    *,
    attempts: int,
    limits: ExtractionLimits,
) -> ExtractionOutcome:
    if not extractor.worth_asking(snapshot):
        return ExtractionOutcome((), 0)
    prompt = extractor.prompt(snapshot)
    messages = prompt
    reason = ""
    answers: list[ChatAnswer] = []
    for attempt in range(1, attempts + 1):
        answer = await llm.complete_json(messages)
        answers.append(answer)
        try:
            memories = parsed(extractor, answer.text, snapshot, limits)
            return ExtractionOutcome(memories, attempt, answers=tuple(answers))
        except InvalidExtraction as exc:
            reason = str(exc)
            messages = [*prompt, *_correction(answer.text, reason)]
    return ExtractionOutcome(
        (),
        attempts,
        failure=f"invalid LLM output: {reason}",
        last_answer=answers[-1].text if answers else "",
        answers=tuple(answers),
    )


def parsed(
    extractor: Extractor, answer: str, snapshot: SnapshotPromoted, limits: ExtractionLimits
) -> tuple[MemoryContent, ...]:
    """The distinct memories of one answer within `limits`, or `InvalidExtraction` saying which
    limit.

    Over the memory cap (distinct items) the answer is refused whole, not cut to its first
    items: an answer that long is a model listing the conversation, and which items to keep
    cannot be told; the retry is told the cap (docs/architecture.md, "Operations"). An answer
    cut off by the token limit keeps the items it completed (`json_answer.items_under`)."""
    refuse_oversized(answer, limits.max_answer_bytes)
    drafts = _drafts_in(answer)
    if drafts > limits.max_memories:
        raise InvalidExtraction(
            f"{drafts} memories in one answer, more than the limit of "
            f"{limits.max_memories}: keep only the most important"
        )
    return distinct(extractor.parse(answer, snapshot))


def refuse_oversized(answer: str, max_answer_bytes: int) -> None:
    """`InvalidExtraction` when an LLM answer is longer than `max_answer_bytes` (UTF-8): it is not
    parsed, and the retry is told the limit."""
    size = len(answer.encode())
    if size > max_answer_bytes:
        raise InvalidExtraction(
            f"the answer is {size} bytes, more than the limit of {max_answer_bytes}"
        )


def asked_again(
    prompt: Sequence[dict[str, str]], answer: str, problem: InvalidExtraction | str
) -> list[dict[str, str]]:
    """`prompt` followed by the refused `answer` (its first 1,000 characters) and what was wrong
    with it: how reconciliation and consolidation ask once more."""
    return [
        *prompt,
        {"role": "assistant", "content": answer[:1_000]},
        {"role": "user", "content": f"That answer was invalid: {problem}. Answer again."},
    ]


def _drafts_in(answer: str) -> int:
    """How many distinct items the answer's lists hold (every extractor answers
    `{"<kind>": [...]}`), counted before parsing, which may drop some; a model repeating one
    item counts it once, and an answer cut short counts the items it completed
    (`json_answer.completed_before_cut`). 0 when it is not a JSON object (the parser says why)."""
    from handlers.extraction import json_answer  # it imports this module

    try:
        value = json_answer.load_object(answer)
    except InvalidExtraction:
        value = json_answer.completed_before_cut(answer)
    lists = [items for items in value.values() if isinstance(items, list)]
    # the standard library's encoder: a cut answer's integers are not bounded to 64 bits
    return sum(len({json.dumps(item, sort_keys=True) for item in items}) for items in lists)


def _correction(answer: str, reason: str) -> Sequence[dict[str, str]]:
    return (
        {"role": "assistant", "content": answer[:2_000]},
        {
            "role": "user",
            "content": f"That answer was invalid: {reason}. Answer again with only the JSON.",
        },
    )
