"""Reading skipped records back from a real broker (Tansu and Apache Kafka)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from faust.types import TP

from streams.log_reader import KafkaLogReader

pytestmark = pytest.mark.integration


def test_reads_exactly_the_range_even_from_inside_a_batch(broker: Any) -> None:
    topic = f"log-reader-{uuid.uuid4().hex[:8]}"

    async def scenario() -> list[tuple[int, bytes | None]]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=20)
        await producer.start()
        try:
            sent = [await producer.send(topic, f"r{i}".encode(), partition=0) for i in range(6)]
            await asyncio.gather(*sent)  # one multi-record batch
        finally:
            await producer.stop()
        records = await KafkaLogReader(broker.bootstrap_servers)(TP(topic, 0), 2, 5)
        return [(record.offset, record.value) for record in records]

    assert asyncio.run(asyncio.wait_for(scenario(), 60)) == [(2, b"r2"), (3, b"r3"), (4, b"r4")]
