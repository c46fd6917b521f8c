"""When an erasure receipt is complete: the steps a forget request must leave, and those it has.

A forget request is carried out by several stages, each on its own topic and partition, and each
leaves a *step* on the request's receipt (collection `erasures`, docs/architecture.md,
"Forgetting"): `turns-<partition>` (the turns-topic request itself), `snapshots-<id>` (a window
partition's `SessionsForgotten`), `memories-<id>` (a memory type's `MemoriesForgotten`). Nothing
records how many steps will come, so the read side computes it from the configuration:

* memory, or a memory's expiry: 1 memories step (the memory's type's stage);
* session: 1 turns + 1 snapshots + T memories steps (every type's stage reads the
  `SessionsForgotten`, T = the number of memory types: the 4 built-in ones and the project's
  declared custom ones);
* user: P turns + P snapshots + T·(P + 1) memories steps (P = `kafka.partitions`: one copy of the
  request per turns partition, each giving a `SessionsForgotten`, plus the snapshots-topic copy
  for the direct saves, each read by every type's stage).

A receipt is complete when every topic has at least its expected steps. Steps are keyed by the
event that made them, so a redelivered record adds no step and cannot make a receipt look
complete early; more steps than expected (the partition count was raised after the request) still
count as complete. Every memory type's stage always runs, enabled or not, which is why T is the
number of memory types and not of enabled ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from events.forgetting import ForgetScope
from events.memories import MEMORY_TYPES
from events.turns import Principal

StepTopic = Literal["turns", "snapshots", "memories"]
STEP_TOPICS: tuple[StepTopic, ...] = ("turns", "snapshots", "memories")
SDK_REQUESTER = "sdk"
"""`requested_by` of a request made through the SDK by code acting as no principal."""


def expected_steps(
    kind: ForgetScope, partitions: int, types: int = len(MEMORY_TYPES)
) -> dict[StepTopic, int]:
    """How many steps of each topic a request of `kind` leaves with `types` memory types (their
    stages; see the module doc)."""
    if kind in ("memory", "expiry"):
        return {"turns": 0, "snapshots": 0, "memories": 1}
    if kind == "session":
        return {"turns": 1, "snapshots": 1, "memories": types}
    return {"turns": partitions, "snapshots": partitions, "memories": types * (partitions + 1)}


def steps_seen(steps: Mapping[str, Mapping[str, Any]]) -> dict[StepTopic, int]:
    """How many steps of each topic a receipt lists (a step's topic: its `topic` field, else
    the prefix of its id)."""
    seen: dict[StepTopic, int] = dict.fromkeys(STEP_TOPICS, 0)
    for step_id, step in steps.items():
        topic = step.get("topic") or step_id.partition("-")[0]
        if topic in seen:
            seen[topic] += 1
    return seen


def is_complete(
    kind: ForgetScope,
    steps: Mapping[str, Mapping[str, Any]],
    partitions: int,
    types: int = len(MEMORY_TYPES),
) -> bool:
    """Has every stage that must act on a request of `kind` left its step?"""
    seen = steps_seen(steps)
    expected = expected_steps(kind, partitions, types)
    return all(seen[topic] >= count for topic, count in expected.items())


def with_progress(
    receipt: Mapping[str, Any], partitions: int, types: int = len(MEMORY_TYPES)
) -> dict[str, Any]:
    """The receipt with its `request_id` (the document's `_id`), `complete` and, per topic,
    `expected_steps` and `seen_steps`."""
    kind: ForgetScope = receipt["kind"]
    steps = receipt.get("steps") or {}
    return {
        "request_id": receipt["_id"],
        **receipt,
        "complete": is_complete(kind, steps, partitions, types),
        "expected_steps": expected_steps(kind, partitions, types),
        "seen_steps": steps_seen(steps),
    }


def requester(principal: Principal | None, fallback: str = SDK_REQUESTER) -> str:
    """`requested_by` of a request: the acting principal (`<kind>:<id>`), else `fallback`
    (`sdk`, or the CLI's `cli:<operator>`)."""
    if principal is None:
        return fallback
    return f"{principal.kind}:{principal.id}"
