"""Ingest benchmark: recording turns through the SDK vs raw aiokafka producing the same records.

    .venv/bin/python bench/ingest.py [--turns 5000] [--batch 10] [--rounds 3]

Starts an embedded Tansu broker, then alternates rounds of:
- baseline: aiokafka `send()` of pre-encoded TurnRecorded records (same keys, same bytes), one
  `send_and_wait` barrier per batch, like the SDK;
- memstream: `MemoryClient.record()` of the same messages in batches (normalisation, validation,
  event construction and encoding included).
Reports turns/s for each and the ratio memstream/baseline (median of the rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime

from aiokafka import AIOKafkaProducer

from events.codec import encode
from events.turns import TurnRecorded
from memstream.client import MemoryClient
from memstream.config import load_settings
from memstream.servers import TansuBroker
from memstream.topics import ensure_topics


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


async def main(turns: int, batch: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as workdir, TansuBroker(workdir) as broker:
        env = {
            "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
            "MEMSTREAM_TOPIC_PREFIX": "bench.",
            "MEMSTREAM_CONFIG": "/dev/null",
        }
        settings = load_settings(environ=env)
        await ensure_topics(settings.kafka)
        messages = conversation(turns)
        base, ours = [], []
        for _ in range(rounds):
            base.append(
                await baseline(
                    broker.bootstrap_servers, settings.kafka.topics.turns, messages, batch
                )
            )
            ours.append(await with_sdk(env, messages, batch))
        b, o = statistics.median(base), statistics.median(ours)
        print(f"turns={turns} batch={batch} rounds={rounds}")
        print(
            f"baseline aiokafka : {b:8.0f} turns/s  (rounds: {', '.join(f'{x:.0f}' for x in base)})"
        )
        print(
            f"memstream SDK     : {o:8.0f} turns/s  (rounds: {', '.join(f'{x:.0f}' for x in ours)})"
        )
        print(f"ratio memstream/baseline: {o / b:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.batch, args.rounds))
