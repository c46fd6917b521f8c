"""Real outages through FaultProxy: a broker (each flavour) and SecantusDB behind a proxy.

These show the building blocks of the outage tests: a broker that advertises the proxy carries
all client traffic through it, ``cut()`` fails sends and ``restore()`` heals them with nothing
lost, ``block_produce()`` fails only produce requests (consumers keep fetching, groups keep
heartbeating), and pymongo through a cut proxy fails fast and recovers.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, KafkaError, NodeNotReadyError
from pymongo import MongoClient
from pymongo.errors import ConnectionFailure

from tests.support.fault_proxy import PRODUCE_API_KEY, FaultProxy
from tests.support.faults import produce_direct, proxied_broker, proxied_mongo

pytestmark = pytest.mark.integration

FETCH_API_KEY = 1
HEARTBEAT_API_KEY = 12
#: A short producer request timeout: a send fails this long after the fault starts.
SHORT_TIMEOUT_MS = 2000
#: The errors a send ends with when the path to the broker is broken (all retriable).
OUTAGE_ERRORS = (KafkaConnectionError, NodeNotReadyError)

Kafka = tuple[Any, FaultProxy]


@pytest.fixture(scope="module")
def proxied(broker_flavour: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka]:
    """A dedicated broker per flavour, advertising a proxy in front of it."""
    with proxied_broker(broker_flavour, tmp_path_factory.mktemp(f"proxied-{broker_flavour}")) as (
        broker,
        proxy,
    ):
        yield broker, proxy


@pytest.fixture
def kafka(proxied: Kafka) -> Iterator[Kafka]:
    """The proxied broker, with the proxy passing traffic before and after each test."""
    proxied[1].restore()
    yield proxied
    proxied[1].restore()


async def new_topic(broker: Any) -> str:
    topic = f"fault-{uuid.uuid4().hex[:10]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()
    return topic


@asynccontextmanager
async def producer(bootstrap: str, **options: Any) -> AsyncIterator[AIOKafkaProducer]:
    client = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **options)
    await client.start()
    try:
        yield client
    finally:
        await client.stop()


@asynccontextmanager
async def consumer(bootstrap: str, topic: str) -> AsyncIterator[AIOKafkaConsumer]:
    client = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"g-{uuid.uuid4().hex[:10]}",  # a new group reads from the start
        auto_offset_reset="earliest",
        session_timeout_ms=3000,
        heartbeat_interval_ms=500,
    )
    await client.start()
    try:
        yield client
    finally:
        await client.stop()


async def receive(client: AIOKafkaConsumer, count: int, timeout: float = 30.0) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(values) < count and time.monotonic() < deadline:
        batches = await client.getmany(timeout_ms=500)
        for records in batches.values():
            values.extend(r.value for r in records if r.value is not None)
    return values


async def read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    async with consumer(bootstrap, topic) as client:
        values = await receive(client, count)
        values += await receive(client, 1, timeout=1.0)  # nothing more than expected
        return values


async def test_kafka_traffic_goes_through_the_proxy(kafka: Kafka) -> None:
    broker, proxy = kafka
    topic = await new_topic(broker)
    before = proxy.stats()
    values = [f"v{i}".encode() for i in range(5)]
    # Bootstrapping on the broker's own port or on the proxy: both continue on the proxy.
    async with producer(broker.bootstrap_servers) as client:
        for value in values:
            await client.send_and_wait(topic, value)
    assert await read_all(proxy.address, topic, len(values)) == values
    after = proxy.stats()
    assert after.connections > before.connections
    produced = after.requests.get(PRODUCE_API_KEY, 0) - before.requests.get(PRODUCE_API_KEY, 0)
    assert produced >= len(values)
    assert after.requests.get(FETCH_API_KEY, 0) > before.requests.get(FETCH_API_KEY, 0)
    assert after.produce_blocked == before.produce_blocked


async def test_cut_fails_sends_and_restore_recovers_with_nothing_lost(kafka: Kafka) -> None:
    broker, proxy = kafka
    topic = await new_topic(broker)
    acked: list[bytes] = []
    async with producer(broker.bootstrap_servers, request_timeout_ms=SHORT_TIMEOUT_MS) as client:
        for i in range(3):
            await client.send_and_wait(topic, f"before-{i}".encode())
            acked.append(f"before-{i}".encode())
        cut_before = proxy.stats().connections_cut
        proxy.cut()
        assert proxy.stats().open_connections == 0
        assert proxy.stats().connections_cut > cut_before
        with pytest.raises(OSError):  # refused, not accepted and dropped
            socket.create_connection(("127.0.0.1", proxy.listen_port), timeout=1).close()
        started = time.monotonic()
        with pytest.raises(KafkaError) as failure:
            await client.send_and_wait(topic, b"during-cut")
        assert isinstance(failure.value, OUTAGE_ERRORS) and failure.value.retriable
        assert time.monotonic() - started < SHORT_TIMEOUT_MS / 1000 + 5
        proxy.restore()
        for i in range(3):  # the same producer, without a restart
            await client.send_and_wait(topic, f"after-{i}".encode())
            acked.append(f"after-{i}".encode())
    # Every acknowledged record arrives once, in order; the failed one never reached the broker.
    assert await read_all(broker.bootstrap_servers, topic, len(acked)) == acked


async def test_block_produce_fails_sends_while_consumers_keep_fetching(kafka: Kafka) -> None:
    broker, proxy = kafka
    topic = await new_topic(broker)
    async with (
        consumer(broker.bootstrap_servers, topic) as reader,
        producer(broker.bootstrap_servers, request_timeout_ms=SHORT_TIMEOUT_MS) as client,
    ):
        await client.send_and_wait(topic, b"before")
        received = await receive(reader, 1)
        assignment = reader.assignment()

        proxy.block_produce()
        blocked_before = proxy.produce_blocked
        with pytest.raises(KafkaError) as failure:
            await client.send_and_wait(topic, b"blocked")
        assert isinstance(failure.value, KafkaConnectionError) and failure.value.retriable
        assert proxy.produce_blocked > blocked_before

        during = proxy.stats()
        # Written past the proxy; the consumer reads them through it while produce is blocked.
        await produce_direct(broker.bootstrap_servers, topic, [(None, b"direct-1")])
        await produce_direct(broker.bootstrap_servers, topic, [(b"k", b"direct-2")])
        received += await receive(reader, 2)
        await asyncio.sleep(1.5)  # a few heartbeat intervals
        later = proxy.stats()
        assert later.requests[FETCH_API_KEY] > during.requests[FETCH_API_KEY]
        assert later.requests.get(HEARTBEAT_API_KEY, 0) > during.requests.get(HEARTBEAT_API_KEY, 0)
        assert reader.assignment() == assignment  # the group did not fall apart

        proxy.restore()
        await client.send_and_wait(topic, b"after")
        received += await receive(reader, 1)
    assert received == [b"before", b"direct-1", b"direct-2", b"after"]
    assert await read_all(broker.bootstrap_servers, topic, 4) == received


@pytest.mark.parametrize("fault", ["cut", "block_produce"])
async def test_a_producer_recovers_by_itself_when_the_fault_ends_in_time(
    kafka: Kafka, fault: str
) -> None:
    """aiokafka (and so Faust) retries a send until its request timeout: heal within it and the
    pending send succeeds, with no error and no duplicate."""
    broker, proxy = kafka
    topic = await new_topic(broker)
    async with producer(broker.bootstrap_servers, request_timeout_ms=15_000) as client:
        await client.send_and_wait(topic, b"before")
        getattr(proxy, fault)()
        pending = asyncio.ensure_future(client.send_and_wait(topic, b"during"))
        await asyncio.sleep(2)
        assert not pending.done()
        proxy.restore()
        metadata = await asyncio.wait_for(pending, 15)
        assert metadata.offset == 1
    assert await read_all(broker.bootstrap_servers, topic, 2) == [b"before", b"during"]


def test_mongo_through_the_proxy_fails_while_cut_and_recovers(mongo: Any) -> None:
    with proxied_mongo(mongo) as (proxy, uri):
        assert "directConnection=true" in uri
        client: MongoClient[dict[str, Any]] = MongoClient(
            uri, serverSelectionTimeoutMS=1000, connectTimeoutMS=1000, socketTimeoutMS=3000
        )
        try:
            docs = client[f"fault_{uuid.uuid4().hex[:10]}"]["docs"]
            docs.insert_one({"_id": 1})
            assert proxy.connections >= 1

            proxy.cut()
            started = time.monotonic()
            with pytest.raises(ConnectionFailure):  # ServerSelectionTimeoutError, AutoReconnect
                docs.insert_one({"_id": 2})
            with pytest.raises(ConnectionFailure):
                docs.find_one({"_id": 1})
            assert time.monotonic() - started < 10

            proxy.restore()
            deadline = time.monotonic() + 20
            while True:
                try:
                    docs.insert_one({"_id": 3})
                    break
                except ConnectionFailure:
                    if time.monotonic() > deadline:
                        raise
            assert sorted(d["_id"] for d in docs.find()) == [1, 3]
        finally:
            client.close()
