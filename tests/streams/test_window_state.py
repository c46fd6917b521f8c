"""The window's state is open work: a quiet session's window is retired after the dedup horizon
(docs/architecture.md, "Stages"), on both brokers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.pipeline import PipelineHarness, eventually, read_topic

pytestmark = pytest.mark.integration


def window_changelog(pipeline: PipelineHarness) -> list[Any]:
    settings = pipeline.settings
    topic = f"{settings.kafka.group_prefix}window-session-windows-changelog"
    return asyncio.run(
        read_topic(settings.kafka.bootstrap_servers, topic, settings.kafka.partitions)
    )


def latest(records: list[Any], key: bytes) -> Any:
    mine = [record for record in records if record.key == key]
    return mine[-1] if mine else None


def test_a_quiet_window_is_deleted_after_the_dedup_horizon_and_a_later_turn_opens_a_new_one(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(MEMSTREAM_DEDUP_HORIZON="4")
    pipeline.llm.on("Lisbon", {"memories": []})
    pipeline.record("rita", "r1", [{"role": "user", "content": "I live in Lisbon."}])
    pipeline.flush("rita", "r1")
    eventually(lambda: pipeline.snapshots(user_id="rita"), lambda s: len(s) == 1, what="promoted")

    key = b"rita|r1"
    stored = eventually(
        lambda: latest(window_changelog(pipeline), key),
        lambda record: record is not None and record.value is None,
        timeout=90,
        what="the window's tombstone in its changelog",
    )
    assert stored.value is None

    pipeline.record("rita", "r1", [{"role": "user", "content": "Still in Lisbon."}])
    pipeline.flush("rita", "r1")
    snapshots = eventually(
        lambda: pipeline.snapshots(user_id="rita"), lambda s: len(s) == 2, what="second snapshot"
    )
    assert [s["seq"] for s in snapshots] == [0, 0]  # a new window, numbered from 0 again
    assert len({s["_id"] for s in snapshots}) == 2  # ids come from the turns, never repeat
