"""Running one extractor over a snapshot: prompt, validate, retry, or give up with the reason."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from events.memories import MemoryContent, MemoryType
from events.snapshots import SnapshotPromoted
from handlers.ports import ChatAnswer, ChatModel


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
    extractor: Extractor, snapshot: SnapshotPromoted, llm: ChatModel, *, attempts: int = 3
) -> ExtractionOutcome:
    """Ask the LLM up to `attempts` times; each retry is told what was wrong with the last answer.

    Transport errors (LLM unreachable) propagate: the caller retries those without consuming the
    snapshot, so an outage never turns into dead letters. A snapshot the extractor does not find
    worth asking about costs no call: no memories, 0 attempts.
    """
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
            memories = tuple(extractor.parse(answer.text, snapshot))
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


def _correction(answer: str, reason: str) -> Sequence[dict[str, str]]:
    return (
        {"role": "assistant", "content": answer[:2_000]},
        {
            "role": "user",
            "content": f"That answer was invalid: {reason}. Answer again with only the JSON.",
        },
    )
