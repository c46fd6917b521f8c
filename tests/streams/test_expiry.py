"""Expiry through the whole pipeline: a memory's version expires (by the type's retention, or the
time a direct save asked for) and leaves every read model and a replay the way a forgotten one
does, with a receipt; memories without an expiry stay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.streams.test_forgetting import (
    everything_of,
    memory_texts,
    replayed,
    say,
    script,
    wait_for_memories,
    with_client,
)
from tests.support.pipeline import PipelineHarness, eventually

pytestmark = pytest.mark.integration
MEMORY_MODELS = ("memories", "memory_events", "profiles", "saves")
"""What expiry erases: the memory; the turns it was learned from are short-term memory and stay."""


def test_a_memory_expires_by_retention_or_by_request_and_leaves_no_trace(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(
        every_stage=True,  # it saves episodic and procedural memories
        MEMSTREAM_RETENTION="semantic=10",
        MEMSTREAM_EXPIRY_CHECK_INTERVAL="0.5",
        MEMSTREAM_ENABLED_EXTRACTIONS="semantic",
    )
    script(pipeline)
    say(pipeline, "ann", "a1", "I work at Stripe.")  # semantic: expires 10 s after the flush
    soon = datetime.now(UTC) + timedelta(seconds=4)
    pipeline.save("ann", "episodic", "Ann went hiking on Sunday.", expires_at=soon)
    pipeline.save("ann", "procedural", "Answer Ann in short sentences.")  # no retention: stays
    wait_for_memories(
        pipeline,
        "ann",
        [
            "Answer Ann in short sentences.",
            "Ann went hiking on Sunday.",
            "The user works at Stripe.",
        ],
    )
    (stripe,) = pipeline.memories(user_id="ann", text="The user works at Stripe.")
    assert stripe["expires_at"] is not None

    eventually(
        lambda: memory_texts(pipeline, "ann"),
        lambda texts: texts == ["Answer Ann in short sentences."],
        timeout=90,
        what="the two expiring memories gone",
    )
    receipts = eventually(
        lambda: with_client(pipeline, lambda c: c.erasures("ann")),
        lambda found: len(found) == 2 and all(r["complete"] for r in found),
        what="two complete expiry receipts",
    )
    assert {r["kind"] for r in receipts} == {"expiry"}
    assert {r["requested_by"] for r in receipts} == {"expiry"}
    left = everything_of(pipeline.db, "ann", MEMORY_MODELS)
    assert "Stripe" not in left and "hiking" not in left and "short sentences" in left

    rebuilt = replayed(pipeline)
    text = everything_of(rebuilt, "ann", MEMORY_MODELS)
    assert "Stripe" not in text and "hiking" not in text and "short sentences" in text
