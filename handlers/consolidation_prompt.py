"""Asking the LLM about one consolidation cluster, and reading the answer strictly.

One call per cluster (docs/architecture.md, "Consolidation"): the cluster's memories — one
user's, of one type and subject — numbered newest first, answered with one JSON object: MERGE
(they say the same thing: one memory, with text saying everything they say, survives),
SUPERSEDE (they contradict: the one true now survives, the others are retired) or KEEP
(distinct facts that are all true). An answer is held to what it was shown: a number outside
the cluster, an unknown action, a merge without text or invalid JSON is asked again with the
reason, within the calls the caller allows; with no valid answer the cluster is kept as it is
(never a lost memory).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from handlers.consolidation import Cluster, ClusterAnswer, Verdict
from handlers.extraction.base import (
    DEFAULT_MAX_ANSWER_BYTES,
    InvalidExtraction,
    asked_again,
    refuse_oversized,
)
from handlers.extraction.json_answer import load_object
from handlers.known_memory import KnownMemory
from handlers.ports import ChatAnswer, ChatModel

log = logging.getLogger(__name__)

PROMPT_VERSION = "consolidate-2"
"""consolidate-1 listed the memories oldest first; the packaged 1.5B model then kept the older
value in 4 of 9 contradictions (BENCHMARKS.md, "Consolidation on labelled clusters"). -2 lists
them newest first: number 1 is the newest."""
OPENING = "You tidy a long-term memory."
"""How the system prompt begins (scripted models in tests recognise a consolidation by it)."""
MAX_TEXT_CHARS = 4_000
ACTIONS = ("MERGE", "SUPERSEDE", "KEEP")

SYSTEM_PROMPT = f"""\
{OPENING} You get a numbered list of memories about the same subject, newest first: number 1 \
is the most recent. Memories that look alike are often different facts that are all true. \
Decide what the list is:
- "MERGE": they all say the same thing, in other words or with more or less detail. Write one \
memory ("text") that says everything they say, and give the number of the memory it replaces \
("keep", usually 1).
- "SUPERSEDE": they cannot all be true now, because they give other values for the very same \
thing (another city, another job, another number, another date for the same plan). Give the \
number of the one that is true now ("keep"): the newest, number 1, unless another one says the \
fact changed back.
- "KEEP": they are different facts that stay true beside each other (another allergy, another \
pet, another hobby, another rule). When in doubt, KEEP.

Answer with one JSON object, keys in this order:
{{"action": "MERGE" | "SUPERSEDE" | "KEEP", "keep": <number, or null for KEEP>, "text": \
"<the merged memory for MERGE, else null>", "reason": "<a few words>"}}

Example:
1. The user owns a dog called Rex.
2. The user has a dog named Rex.
Answer: {{"action": "MERGE", "keep": 1, "text": "The user has a dog named Rex.", "reason": \
"same dog"}}

Example:
1. The user moved to Porto and lives there now.
2. The user lives in Lisbon.
Answer: {{"action": "SUPERSEDE", "keep": 1, "text": null, "reason": "moved to Porto"}}

Example:
1. The user is allergic to cats.
2. The user is allergic to peanuts.
Answer: {{"action": "KEEP", "keep": null, "text": null, "reason": "two allergies"}}
"""


def shown(cluster: Cluster) -> list[KnownMemory]:
    """The cluster's memories as the prompt numbers them: newest first."""
    return list(reversed(cluster.members))


def prompt(cluster: Cluster) -> list[dict[str, str]]:
    """The messages asking about `cluster` (its members numbered from 1, newest first)."""
    listed = "\n".join(f"{n}. {m.content.text}" for n, m in enumerate(shown(cluster), 1))
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"MEMORIES:\n{listed}\nAnswer with the JSON."},
    ]


def in_cluster_order(verdict: Verdict, size: int) -> Verdict:
    """`verdict` (its survivor counted as the prompt numbers the memories, from 0) with the
    survivor's index in the cluster (oldest first)."""
    if verdict.survivor is None:
        return verdict
    return replace(verdict, survivor=size - 1 - verdict.survivor)


def parse(text: str, size: int) -> Verdict:
    """The answer as a `Verdict` about a cluster of `size` memories (its survivor counted as
    the prompt numbers them: `in_cluster_order` turns it around); `InvalidExtraction` with the
    reason when it does not follow the format or names a memory it was not shown."""
    return verdict_of(load_object(text), size)


def verdict_of(answer: Mapping[str, Any], size: int) -> Verdict:
    """One answer object held to a cluster of `size` memories (see `parse`)."""
    action = str(answer.get("action", "")).strip().upper()
    if action not in ACTIONS:
        raise InvalidExtraction(f'"action" must be one of {", ".join(ACTIONS)}, got {action!r}')
    reason = " ".join(str(answer.get("reason") or "").split())[:300]
    if action == "KEEP":
        return Verdict("keep", reason=reason)
    number = _number(answer.get("keep"))
    if number is None or not 1 <= number <= size:
        raise InvalidExtraction(f'"keep" must be the number of one of the {size} memories')
    if action == "SUPERSEDE":
        return Verdict("supersede", survivor=number - 1, reason=reason)
    merged = answer.get("text")
    if not isinstance(merged, str) or not merged.strip():
        raise InvalidExtraction('a MERGE needs "text": the merged memory')
    merged = merged.strip()
    if len(merged) > MAX_TEXT_CHARS:
        raise InvalidExtraction(f'"text" must be at most {MAX_TEXT_CHARS} characters')
    return Verdict("merge", survivor=number - 1, text=merged, reason=reason)


async def ask(
    llm: ChatModel,
    cluster: Cluster,
    *,
    calls: int,
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
) -> tuple[Verdict | None, list[ChatAnswer]]:
    """Ask up to `calls` times (each retry told what was wrong); None if no answer held.

    Transport errors propagate: the caller waits an unreachable LLM out."""
    messages = prompt(cluster)
    answers: list[ChatAnswer] = []
    for _ in range(calls):
        answer = await llm.complete_json(messages)
        answers.append(answer)
        try:
            refuse_oversized(answer.text, max_answer_bytes)
            size = len(cluster.members)
            return in_cluster_order(parse(answer.text, size), size), answers
        except InvalidExtraction as exc:
            log.info("consolidation answer refused: %s", exc)
            messages = asked_again(prompt(cluster), answer.text, exc)
    return None, answers


Ask = Callable[[Cluster, int], Awaitable[tuple[Verdict | None, list[ChatAnswer]]]]
"""Ask about one cluster in at most that many calls (`ask`, as the stage wires it)."""


async def ask_within(
    clusters: Sequence[Cluster], *, max_calls: int, attempts: int, ask: Ask
) -> tuple[list[ClusterAnswer], list[ChatAnswer]]:
    """Ask about `clusters` in order, one after the other, until `max_calls` LLM calls are
    spent (a re-ask counts; the last cluster asked gets the calls that are left, at most
    `attempts`); the clusters after that are not asked. Every cluster is in the answer."""
    answered: list[ClusterAnswer] = []
    answers: list[ChatAnswer] = []
    for cluster in clusters:
        left = max_calls - len(answers)
        if left <= 0:
            answered.append(ClusterAnswer(cluster, None, asked=False))
            continue
        verdict, given = await ask(cluster, min(attempts, left))
        answers.extend(given)
        answered.append(ClusterAnswer(cluster, verdict, asked=True))
    return answered, answers


def _number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None
