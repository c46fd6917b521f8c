"""The service's limits on the real pipeline: each over-limit input is dead-lettered with the
reason, and input within the limits around it is processed."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from memstream.runtime.status import status
from tests.support.pipeline import PipelineHarness, eventually, produce_raw

pytestmark = pytest.mark.integration


def facts(*statements: str) -> dict[str, Any]:
    return {
        "facts": [
            {"subject": "the user", "statement": s, "owner": "user", "category": "work"}
            for s in statements
        ]
    }


def test_an_oversized_turn_and_an_answer_over_the_memory_cap_are_dead_lettered(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(
        MEMSTREAM_MAX_TURN_CHARS="60", MEMSTREAM_MAX_MEMORIES_PER_EXTRACTION="2"
    )
    three = facts("The user works at Stripe.", "The user lives in Zanzibar.", "The user codes.")
    pipeline.llm.on("Zanzibar", three)  # every attempt (retries too): over the cap
    pipeline.llm.on("Stripe", facts("The user works at Stripe."), scope="last_user")
    # Another producer (not the SDK, which refuses it) sends a turn over the limit.
    oversized = {
        "event_id": "too-long",
        "event_type": "TurnRecorded",
        "schema_version": 1,
        "occurred_at": "2026-01-01T00:00:00Z",
        "recorded_at": "2026-01-01T00:00:00Z",
        "user_id": "gus",
        "session_id": "s",
        "role": "user",
        "content": "I work at Stripe. " * 5,
    }
    kafka = pipeline.settings.kafka
    asyncio.run(
        produce_raw(
            kafka.bootstrap_servers or "",
            kafka.topics.turns,
            [(b"gus|s", json.dumps(oversized).encode(), None)],
        )
    )
    pipeline.record("gus", "s", [{"role": "user", "content": "I work at Stripe."}])
    pipeline.flush("gus", "s")
    pipeline.record("hal", "s", [{"role": "user", "content": "I live in Zanzibar, at Stripe."}])
    pipeline.flush("hal", "s")
    letters = eventually(
        lambda: list(pipeline.db["dead_letters"].find()),
        lambda d: len(d) == 2,
        what="two dead letters",
    )
    reasons = {letter["stage"]: letter["reason"] for letter in letters}
    assert (
        "turn too large: too-long has 90 characters, more than the limit of 60"
        in (reasons["window"])
    )
    # The failure's details may quote the conversation: sealed in the result, which the read
    # model opens; the dead letter gives its kind (docs/architecture.md, "Crypto-shredding").
    assert reasons["extract-semantic"].startswith("invalid LLM output")
    assert "Zanzibar" not in reasons["extract-semantic"]
    (failed,) = eventually(
        lambda: pipeline.snapshots(user_id="hal"), lambda s: len(s) == 1, what="hal's snapshot"
    )
    failure = failed["extractions"]["semantic"]["failure"]
    assert "3 memories in one answer, more than the limit of 2" in failure
    (memory,) = eventually(
        lambda: pipeline.memories(user_id="gus"), lambda m: len(m) == 1, what="gus's memory"
    )
    assert memory["text"] == "The user works at Stripe."
    (snapshot,) = pipeline.snapshots(user_id="gus")
    assert snapshot["turn_count"] == 1  # the oversized turn is not in it
    assert pipeline.memories(user_id="hal") == []


def test_a_user_over_the_daily_llm_budget_waits_and_others_go_on(pipeline_factory: Any) -> None:
    """A budget of 1 token: ann's first snapshot is extracted (nothing spent yet), her second
    waits in the log — no LLM call, status and the metrics say so — while bob's goes on; when
    her day's count is gone (a new day), her waiting snapshot is extracted as it would have
    been."""
    pipeline: PipelineHarness = pipeline_factory(
        MEMSTREAM_LLM_DAILY_TOKEN_BUDGET="1",
        MEMSTREAM_LLM_BUDGET_CHECK_INTERVAL="0.5",
        MEMSTREAM_METRICS_PORT="0",
    )
    pipeline.llm.on("Stripe", facts("The user works at Stripe."), scope="last_user")
    pipeline.llm.on("Lisbon", facts("The user lives in Lisbon."), scope="last_user")
    pipeline.llm.on("Oslo", facts("The user lives in Oslo."), scope="last_user")

    def learned(user: str, count: int) -> list[dict[str, Any]]:
        return eventually(
            lambda: pipeline.memories(user_id=user),
            lambda found: len(found) == count,
            timeout=90,
            what=f"{count} memories of {user}",
        )

    pipeline.record("ann", "s1", [{"role": "user", "content": "I work at Stripe."}])
    pipeline.flush("ann", "s1")
    learned("ann", 1)
    pipeline.record("ann", "s2", [{"role": "user", "content": "I live in Lisbon."}])
    pipeline.flush("ann", "s2")
    pipeline.record("bob", "s1", [{"role": "user", "content": "I live in Oslo."}])
    pipeline.flush("bob", "s1")
    learned("bob", 1)
    time.sleep(2)
    asked = [r["messages"][-1]["content"] for r in pipeline.llm.chat_requests]
    assert not any("Lisbon" in text for text in asked)
    assert len(pipeline.memories(user_id="ann")) == 1
    log = (pipeline.log_dir / "worker-extract-semantic.log").read_text()
    assert "ann spent its 1 LLM tokens of today" in log
    budget = pipeline.db["llm_budget"]
    assert {d["user_id"] for d in budget.find()} == {"ann", "bob"}
    report = status(pipeline.settings, timeout=5)
    assert report["over_llm_budget_today"] == ["ann", "bob"]
    address = pipeline.pipeline.processes["extract:semantic"].metrics_address()
    scraped = httpx.get(f"{address}/metrics", timeout=5).text
    assert 'memstream_llm_budget_waiting_snapshots{memory_type="semantic"} 1.0' in scraped
    assert 'memstream_llm_budget_exceeded_total{memory_type="semantic"} 1.0' in scraped

    budget.delete_many({"user_id": "ann"})  # what the next UTC day does to her count
    texts = {m["text"] for m in learned("ann", 2)}
    assert texts == {"The user works at Stripe.", "The user lives in Lisbon."}
