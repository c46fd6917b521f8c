"""A librdkafka client (confluent-kafka) writes turns and reads memories, on both brokers.

Producers in other languages mostly use librdkafka; this checks the record format
docs/producers.md documents with hand-built JSON, not memstream's models: the page's producer
block records two turns and a flush, the pipeline (scripted LLM) promotes them and extracts a
memory, and a confluent-kafka consumer reads the extraction back as plain JSON (with
the workers' sealing off: sealed content opens only with memstream's key store).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer

from tests.factories import STRIPE_FACTS
from tests.support.documentation import documented_example
from tests.support.pipeline import PipelineHarness, eventually

pytestmark = pytest.mark.integration


def run_documented_block(name: str, pipeline: PipelineHarness) -> str:
    result = subprocess.run(
        [sys.executable, "-c", documented_example(name)],
        env={**os.environ, **pipeline.environment},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def memory_records(
    bootstrap: str, topic: str, timeout: float = 90.0
) -> list[tuple[bytes | None, Any]]:
    """(key, JSON value) of the memories topic's records, read with a librdkafka consumer until
    one carries a decision."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"librdkafka-test-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    records: list[tuple[bytes | None, Any]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            records.append((message.key(), json.loads(message.value() or b"null")))
            if any(value.get("decisions") for _, value in records):
                return records
    finally:
        consumer.close()
    raise AssertionError(f"no memory decision read from {topic} in {timeout:.0f}s: {records!r}")


def test_confluent_kafka_turns_become_a_memory_read_back_as_json(pipeline_factory: Any) -> None:
    # Plain JSON for any client: the workers do not seal (docs/producers.md says so by the block).
    pipeline: PipelineHarness = pipeline_factory(MEMSTREAM_SEAL_CONTENT="false")
    pipeline.llm.on("Stripe", STRIPE_FACTS, scope="last_user")

    run_documented_block("librdkafka-producer", pipeline)

    snapshot = eventually(
        lambda: pipeline.snapshots(user_id="tim"),
        lambda s: len(s) == 1,
        timeout=90,
        what="one snapshot of the librdkafka turns",
    )[0]
    assert (snapshot["session_id"], snapshot["reason"], snapshot["turn_count"]) == (
        "chat-7",
        "flush",
        2,
    )
    assert snapshot["raw_history"] == "[user]: I work at Stripe.\n[assistant]: Nice!"
    assert pipeline.db["dead_letters"].count_documents({}) == 0
    memory = eventually(
        lambda: pipeline.memories(user_id="tim"), lambda m: len(m) == 1, what="one memory"
    )[0]
    assert memory["text"] == "The user works at Stripe."

    records = memory_records(
        pipeline.environment["KAFKA_BOOTSTRAP_SERVERS"], pipeline.settings.kafka.topics.memories
    )
    extracted = [value for key, value in records if value["event_type"] == "SnapshotExtracted"]
    assert [key for key, _ in records] == [b"tim"] * len(records)
    assert len(extracted) == 1
    assert extracted[0]["snapshot_id"] == snapshot["_id"]
    assert extracted[0]["memory_type"] == "semantic"
    (decision,) = extracted[0]["decisions"]
    assert decision["event_type"] == "MemoryAdded"
    assert decision["memory_id"] == memory["memory_id"]
    assert decision["user_id"] == "tim"
    assert decision["content"]["text"] == "The user works at Stripe."

    printed = run_documented_block("librdkafka-consumer", pipeline)
    assert printed.splitlines() == ["tim MemoryAdded The user works at Stripe."]
