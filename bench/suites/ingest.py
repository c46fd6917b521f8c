"""Ingest: recording turns through the SDK vs raw aiokafka producing the same records.

    python -m bench ingest [--quick] [--brokers apache,tansu]

On each broker, alternating which side runs first from round to round:
- baseline: aiokafka `send()` of pre-encoded TurnRecorded records (same keys, same bytes), one
  wait for every record of a batch per batch, like the SDK;
- memstream: `MemoryClient.record()` of the same messages in batches (normalisation, validation,
  event construction and encoding included), content not sealed (`MEMSTREAM_SEAL_CONTENT=false`:
  the suite runs no database for the data keys; `python -m bench encryption` prices sealing).
Reports turns/s for each (median of the rounds) and the ratio memstream/baseline.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaProducer

from bench.core import Aim, BenchContext, Figure, SuiteResult, alternate, median
from events.codec import encode
from events.turns import TurnRecorded
from memstream.config import load_settings
from memstream.runtime.topics import ensure_topics
from memstream.sdk.client import MemoryClient


def conversation(turns: int) -> list[dict[str, str]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"message {i}: I would like to book a table for two at seven tonight.",
        }
        for i in range(turns)
    ]


async def baseline(bootstrap: str, topic: str, messages: list[dict[str, str]], batch: int) -> float:
    now = datetime.now(UTC)
    records = [
        TurnRecorded(
            event_id=str(uuid.uuid4()),
            occurred_at=now,
            recorded_at=now,
            user_id=f"u{i // batch % 50}",
            session_id=f"s{i // batch}",
            role=m["role"],  # type: ignore[arg-type]
            content=m["content"],
        )
        for i, m in enumerate(messages)
    ]
    payloads = [(r.key.encode(), encode(r)) for r in records]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        started = time.perf_counter()
        for offset in range(0, len(payloads), batch):
            futures = [
                await producer.send(topic, value, key=key)
                for key, value in payloads[offset : offset + batch]
            ]
            for future in futures:
                await future
        return len(payloads) / (time.perf_counter() - started)
    finally:
        await producer.stop()


async def with_sdk(
    settings_env: dict[str, str], messages: list[dict[str, str]], batch: int
) -> float:
    settings = load_settings(environ=settings_env)
    async with MemoryClient(settings) as client:
        started = time.perf_counter()
        for offset in range(0, len(messages), batch):
            index = offset // batch
            await client.record(f"u{index % 50}", f"s{index}", messages[offset : offset + batch])
        return len(messages) / (time.perf_counter() - started)


BATCH = 10


async def measure(bootstrap: str, kind: str, turns: int, rounds: int) -> dict[str, list[float]]:
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "MEMSTREAM_TOPIC_PREFIX": f"bench-ingest-{uuid.uuid4().hex[:8]}.",
        "MEMSTREAM_CONFIG": "/dev/null",
        "MEMSTREAM_SEAL_CONTENT": "false",  # no database here; sealing: `bench encryption`
    }
    settings = load_settings(environ=env)
    await ensure_topics(settings.kafka)
    messages = conversation(turns)
    rates: dict[str, list[float]] = {"baseline": [], "memstream": []}
    for _, baseline_first in alternate(rounds):
        order = ("baseline", "memstream") if baseline_first else ("memstream", "baseline")
        for side in order:
            if side == "baseline":
                rate = await baseline(bootstrap, settings.kafka.topics.turns, messages, BATCH)
            else:
                rate = await with_sdk(env, messages, BATCH)
            rates[side].append(rate)
    return rates


def run(context: BenchContext) -> SuiteResult:
    turns, rounds = (1000, 2) if context.quick else (5000, 4)
    figures: list[Figure] = []
    raw: dict[str, Any] = {"turns": turns, "batch": BATCH, "rounds": rounds}
    for kind in context.brokers:
        bootstrap = context.broker(kind).bootstrap_servers
        rates = asyncio.run(measure(bootstrap, kind, turns, rounds))
        raw[kind] = rates
        figures.append(
            Figure(
                "ingest",
                kind,
                "turns/s",
                median(rates["memstream"]),
                median(rates["baseline"]),
                "raw aiokafka, same records",
                Aim(">=", 0.9),
            )
        )
    return SuiteResult(figures, raw)


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["ingest", *sys.argv[1:]]))
