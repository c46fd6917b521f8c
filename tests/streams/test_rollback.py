"""Rollback through the running pipeline: a memory updated by a changed fact is restored to its
first version through the SDK; search serves the restored text, history says who and why; a
rollback to a version that never existed is refused, and the stage goes on."""

from __future__ import annotations

from typing import Any

import pytest

from memstream.sdk.client import MemoryNotFound
from memstream.sdk.sync_client import SyncMemoryClient
from tests.streams.test_reconciliation import (
    THRESHOLDS,
    current,
    said,
    script_a_move_from_lisbon_to_porto,
)
from tests.support.pipeline import PipelineHarness, eventually

pytestmark = pytest.mark.integration


def test_a_memory_rolled_back_serves_its_old_text_and_history_says_who_and_why(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(**THRESHOLDS)
    script_a_move_from_lisbon_to_porto(pipeline)
    said(pipeline, "ivy", "s1", "I live in Lisbon.")
    (first,) = eventually(lambda: current(pipeline, "ivy"), lambda m: len(m) == 1, what="v1")
    said(pipeline, "ivy", "s2", "I moved to Porto.")
    eventually(lambda: current(pipeline, "ivy"), lambda m: m and m[0]["version"] == 2, what="v2")
    memory_id = first["memory_id"]
    calls = len(pipeline.llm.chat_requests)

    with SyncMemoryClient(pipeline.settings) as client:
        rollback_id = client.rollback(
            "ivy", memory_id, 1, requested_by="ops:alice", reason="the move was a mistake"
        )
        result = client.wait_for_rollback("ivy", rollback_id, timeout=90)
        assert (result["refused"], result["versions"]) == (None, [3])
        (restored,) = eventually(
            lambda: client.memories("ivy"), lambda m: m and m[0]["version"] == 3, what="v3"
        )
        assert (restored["memory_id"], restored["text"]) == (memory_id, "The user lives in Lisbon.")
        hits = client.search("ivy", "where does the user live", limit=1)
        assert [(h["text"], h["version"]) for h in hits] == [("The user lives in Lisbon.", 3)]

        versions = client.history("ivy", memory_id)
        assert [(v["version"], v["status"]) for v in versions] == [
            (1, "superseded"),
            (2, "superseded"),
            (3, "current"),
        ]
        rolled_back_by = versions[2]["rolled_back_by"]
        assert rolled_back_by is not None
        assert (rolled_back_by["requested_by"], rolled_back_by["reason"]) == (
            "ops:alice",
            "the move was a mistake",
        )
        assert rolled_back_by["to_version"] == 1
        assert versions[0]["rolled_back_by"] is None and versions[1]["rolled_back_by"] is None
        made = versions[2]["created_by"]
        assert made is not None and made["event"]["supersedes_version"] == 2
        assert "requested by ops:alice" in made["event"]["reason"]

        refused_id = client.rollback("ivy", memory_id, 9, requested_by="ops:alice")
        refused = client.wait_for_rollback("ivy", refused_id, timeout=90)
        assert refused["refused"] is not None and "has no version 9" in refused["refused"]
        assert refused["versions"] == []

        again = client.rollback("ivy", memory_id, 2, requested_by="ops:bob", reason="no, Porto")
        assert client.wait_for_rollback("ivy", again, timeout=90)["versions"] == [4]
        (latest,) = eventually(
            lambda: client.memories("ivy"), lambda m: m and m[0]["version"] == 4, what="v4"
        )
        assert latest["text"] == "The user lives in Porto."
        assert len(pipeline.memories(user_id="ivy")) == 4  # the refusal made no version
        assert len(pipeline.llm.chat_requests) == calls  # a rollback asks no LLM
        logged = [(e.event_type, e.version) for e in client.events("ivy")]
        assert logged == [("MemoryAdded", 1), *(("MemoryUpdated", v) for v in (2, 3, 4))]

        # Forgetting the memory erases its rollbacks; the stage reads its own rollback records
        # (their memory's key destroyed) and goes on deciding the user's saves.
        erased = client.wait_for_erasure(client.forget("ivy", memory_id), timeout=90)
        assert erased["complete"]
        assert pipeline.db["rollbacks"].count_documents({"user_id": "ivy"}) == 0
        assert pipeline.memories(user_id="ivy") == []
        with pytest.raises(MemoryNotFound):
            client.rollback("ivy", memory_id, 1, requested_by="ops:alice")
        client.save("ivy", "semantic", "The user plays the cello.")
        eventually(
            lambda: [m["text"] for m in client.memories("ivy")],
            lambda texts: texts == ["The user plays the cello."],
            what="a save after the erasure",
        )
    assert pipeline.db["dead_letters"].count_documents({}) == 0  # refusals are no poison
