"""`memstream demo`: a sample conversation through the running pipeline, and what came out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from events.memories import USER_SUBJECT
from memstream.client import MemoryClient
from memstream.config import Settings

DEMO_USER = "demo-tim"
DEMO_SESSION = "demo-session-1"
DEMO_CONVERSATION: list[dict[str, Any]] = [
    {
        "role": "user",
        "name": "Tim",
        "content": "Hi! I just moved to Lisbon and I work as a data engineer at Stripe.",
    },
    {"role": "assistant", "content": "Welcome to Lisbon! How are you settling in?"},
    {"role": "user", "content": "Pretty well. I love strong espresso and I cycle to work."},
    {
        "role": "assistant",
        "name": "John",
        "content": "I'm John, Tim's friend from school. I'm a nurse in Berlin.",
    },
    {"role": "assistant", "content": "Nice to meet you, John! Tim, anything I should remember?"},
    {"role": "user", "content": "Yes: I'm allergic to peanuts."},
]


async def record_demo_conversation(settings: Settings) -> None:
    async with MemoryClient(settings) as memory:
        await memory.record(DEMO_USER, DEMO_SESSION, DEMO_CONVERSATION)
        await memory.flush(DEMO_USER, DEMO_SESSION)


def wait_for_memories(
    settings: Settings, timeout: float, check: Callable[[], None] | None = None
) -> list[dict[str, Any]]:
    """Poll the read model until every enabled extractor finished the demo snapshot.

    `check` runs before every poll; what it raises ends the wait (a supervisor's `check`).
    """
    enabled = settings.memory.extraction.enabled
    client = MemoryClient(settings)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if check is not None:
                check()
            snapshots = client.snapshots(DEMO_USER, DEMO_SESSION)
            finished = [s.get("extractions", {}) for s in snapshots]
            if snapshots and all(kind in done for done in finished for kind in enabled):
                failures = [d[k]["failure"] for d in finished for k in enabled if d[k]["failure"]]
                if failures:
                    raise RuntimeError(f"extraction failed: {failures[0]}")
                return client.memories(DEMO_USER)
            time.sleep(0.5)
        raise TimeoutError(f"extraction did not finish in {timeout:.0f}s (see the worker logs)")
    finally:
        asyncio.run(client.close())  # closes the MongoDB connection (no producer was started)


def format_memories(memories: list[dict[str, Any]]) -> str:
    lines = [f"{len(memories)} memories for user {DEMO_USER}:"]
    for memory in sorted(memories, key=lambda m: (m["subject"] != USER_SUBJECT, m["subject"])):
        lines.append(
            f"  [{memory['memory_type']}] subject={memory['subject']!r} owner={memory['owner']}"
            f" category={memory.get('category')}: {memory['text']}"
        )
    return "\n".join(lines)
