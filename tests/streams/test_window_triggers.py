"""The window's topic-shift trigger through the running pipeline: a turn off the session's topic
starts a new snapshot, and a rebuild from the turns topic (another clock, fresh topics and
database) promotes exactly the same snapshots. The embeddings are the scripted server's (a hashed
bag of words: turns that share words are close)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.pipeline import PipelineHarness, copy_turns, eventually

pytestmark = pytest.mark.integration

TOPIC_SHIFT = {"MEMSTREAM_TOPIC_SHIFT_THRESHOLD": "0.2", "MEMSTREAM_MAX_MESSAGES": "20"}
TENNIS = [
    "I play tennis every week.",
    "Tennis again tonight, I play tennis with Ann.",
    "My tennis coach says I play well.",
]
PASTA = ["What is a good pasta recipe for dinner?", "Boil the pasta water with salt first."]
DAY = str(24 * 3600)


def promoted(pipeline: PipelineHarness, count: int) -> list[tuple[str, str, list[str]]]:
    """The user's snapshots, once `count` of them are projected whole: id, reason, turn ids."""
    snapshots = eventually(
        lambda: pipeline.snapshots(user_id="dee"),
        lambda found: len(found) == count and all("turn_ids" in s for s in found),
        timeout=120,
        what=f"{count} snapshots of dee",
    )
    return [(s["_id"], s["reason"], s["turn_ids"]) for s in snapshots]


def test_a_turn_off_the_sessions_topic_starts_a_snapshot_and_a_rebuild_promotes_the_same(
    pipeline_factory: Any,
) -> None:
    live: PipelineHarness = pipeline_factory(**TOPIC_SHIFT)
    live.record("dee", "d1", [{"role": "user", "content": text} for text in TENNIS])
    live.record("dee", "d1", [{"role": "user", "content": text} for text in PASTA])
    live.flush("dee", "d1")
    snapshots = promoted(live, 2)
    assert [(reason, len(turns)) for _, reason, turns in snapshots] == [
        ("topic_shift", 3),
        ("flush", 2),
    ]

    rebuilt: PipelineHarness = pipeline_factory(
        started=False, MEMSTREAM_CLOCK_OFFSET_SECONDS=DAY, **TOPIC_SHIFT
    )
    copy_turns(live, rebuilt)
    rebuilt.start()
    assert promoted(rebuilt, 2) == snapshots
