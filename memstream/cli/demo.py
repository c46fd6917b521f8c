"""`memstream demo`: two sessions through the running pipeline, and what the memory learned.

The first session introduces Tim (and his friend John) and gives a standing rule; the second, a
month later, says Tim moved and restates a taste: the city's memory is UPDATEd (the old version
kept, superseded) and the taste REINFORCEd instead of copied.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from events.memories import USER_SUBJECT
from memstream.config import Settings
from memstream.sdk.client import MemoryClient
from memstream.sdk.results import Memory
from memstream.sdk.sync_client import SyncMemoryClient

DEMO_USER = "demo-tim"
DEMO_SESSIONS: list[tuple[str, list[dict[str, Any]]]] = [
    (
        "demo-session-1",
        [
            {
                "role": "user",
                "name": "Tim",
                "content": "Hi! I live in Lisbon and I work as a data engineer at Stripe.",
            },
            {"role": "assistant", "content": "Nice to meet you, Tim! How do you like Lisbon?"},
            {"role": "user", "content": "A lot. I love strong espresso and I cycle to work."},
            {
                "role": "assistant",
                "name": "John",
                "content": "I'm John, Tim's friend from school. I'm a nurse in Berlin.",
            },
            {"role": "assistant", "content": "Nice to meet you, John! Tim, anything to remember?"},
            {
                "role": "user",
                "content": "Yes: I'm allergic to peanuts. And please always keep your answers "
                "short, I read them on my phone.",
            },
        ],
    ),
    (
        "demo-session-2",
        [
            {
                "role": "user",
                "name": "Tim",
                "content": "Big news: I moved from Lisbon to Porto. I live in Porto now.",
            },
            {"role": "assistant", "content": "Congratulations on the move! How is Porto?"},
            {"role": "user", "content": "Great. And I still love strong espresso."},
        ],
    ),
]


async def record_session(
    settings: Settings, session_id: str, messages: list[dict[str, Any]]
) -> None:
    async with MemoryClient(settings) as memory:
        await memory.record(DEMO_USER, session_id, messages)
        await memory.flush(DEMO_USER, session_id)


def wait_for_extraction(
    settings: Settings, session_id: str, timeout: float, check: Callable[[], None] | None = None
) -> None:
    """Poll the read model until every enabled extractor finished the session's snapshot.

    `check` runs before every poll; what it raises ends the wait (a supervisor's `check`).
    """
    enabled = settings.memory.extraction.enabled
    client = SyncMemoryClient(settings)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if check is not None:
                check()
            snapshots = client.snapshots(DEMO_USER, session_id)
            finished = [s.get("extractions", {}) for s in snapshots]
            if snapshots and all(kind in done for done in finished for kind in enabled):
                failures = [d[k]["failure"] for d in finished for k in enabled if d[k]["failure"]]
                if failures:
                    raise RuntimeError(f"extraction failed: {failures[0]}")
                return
            time.sleep(0.5)
        raise TimeoutError(f"extraction did not finish in {timeout:.0f}s (see the worker logs)")
    finally:
        client.close()


def learned(settings: Settings) -> list[Memory]:
    """Every version of every memory of the demo user."""
    client = SyncMemoryClient(settings)
    try:
        return client.memories(DEMO_USER, history=True)
    finally:
        client.close()


def format_memories(versions: Sequence[Mapping[str, Any]]) -> str:
    """The current memories, each with what reconciliation did to it (updates, reinforcements)."""
    current = [v for v in versions if v["status"] == "current"]
    superseded = {(v["memory_id"], v["version"]): v for v in versions if v["status"] != "current"}
    lines = [f"{len(current)} memories for user {DEMO_USER} after {len(DEMO_SESSIONS)} sessions:"]
    order = sorted(
        current, key=lambda m: (m["memory_type"], m["subject"] != USER_SUBJECT, m["subject"])
    )
    for memory in order:
        history = []
        previous = superseded.get((memory["memory_id"], memory["version"] - 1))
        if previous is not None:
            history.append(f"UPDATED from {previous['text']!r}")
        if memory["reinforcement_count"]:
            history.append(f"REINFORCED {memory['reinforcement_count']}x")
        note = f"  <- {'; '.join(history)}" if history else ""
        lines.append(
            f"  [{memory['memory_type']}] subject={memory['subject']!r} owner={memory['owner']}:"
            f" {memory['text']}{note}"
        )
    return "\n".join(lines)
