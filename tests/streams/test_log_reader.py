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
    from memstream.runtime.servers import TansuBroker, free_port

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


def test_look_aheads_share_kept_consumers_and_read_each_partition_right(broker: Any) -> None:
    """More look-aheads at once than consumers kept, on different partitions: each gets its
    own partition's records, and the consumers are reused rather than started per read."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    from streams import log_reader

    topic = f"log-ahead-{uuid.uuid4().hex[:8]}"

    async def scenario() -> tuple[list[list[bytes | None]], int]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 3, 1)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await producer.start()
        try:
            for partition in range(3):
                for i in range(4):
                    await producer.send_and_wait(
                        topic, f"p{partition}-{i}".encode(), partition=partition
                    )
        finally:
            await producer.stop()
        reader = KafkaLogReader(broker.bootstrap_servers)
        reads = [reader.read_ahead(TP(topic, n % 3), 1, 2) for n in range(9)]
        found = await asyncio.gather(*reads)
        kept = reader._kept
        await reader.close()
        return [[record.value for record in records] for records in found], kept

    found, kept = asyncio.run(asyncio.wait_for(scenario(), 90))
    assert found == [[f"p{n % 3}-1".encode(), f"p{n % 3}-2".encode()] for n in range(9)]
    assert kept <= log_reader.AHEAD_CONSUMERS
