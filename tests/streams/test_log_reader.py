"""Reading skipped records back from a real broker (Tansu and Apache Kafka)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from faust.types import TP

from streams.log_reader import CommittedOffsets, KafkaLogReader

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


def test_committed_offsets_wait_out_a_broker_that_is_not_up_yet(broker_flavour: str) -> None:
    """The stages' timer reads committed offsets; an outage used to escape it and crash them."""
    if broker_flavour != "tansu":
        pytest.skip("one flavour is enough: the broker is down, whichever it would be")
    from memstream.servers import TansuBroker, free_port

    port = free_port()
    topic = f"commits-{uuid.uuid4().hex[:8]}"

    async def scenario() -> dict[TP, int | None]:
        reading = asyncio.create_task(
            CommittedOffsets(f"127.0.0.1:{port}", "no-group")([TP(topic, 0)])
        )
        await asyncio.sleep(2.0)
        assert not reading.done()  # waiting, not crashed
        with TansuBroker(port=port):
            return await asyncio.wait_for(reading, 60)

    assert asyncio.run(scenario()) == {TP(topic, 0): None}
