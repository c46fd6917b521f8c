"""Integration tests for the local server launchers in memstream.runtime.servers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstream.runtime.servers import (
    ApacheKafkaBroker,
    SecantusServer,
    ServerStartError,
    TansuBroker,
    free_port,
)

pytestmark = pytest.mark.integration

TOPIC = "servers-roundtrip"
PARTITIONS = 4
KEYS = [f"user-{i}" for i in range(12)]
PER_KEY = 3


async def kafka_roundtrip(bootstrap: str) -> None:
    """Create a 4-partition topic, produce keyed messages, consume them back with a group."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)]
        )
        for _ in range(60):  # a topic just created may show no partitions until metadata settles
            topics = await admin.describe_topics([TOPIC])
            if topics[0]["partitions"]:
                break
            await asyncio.sleep(0.5)
        assert len(topics[0]["partitions"]) == PARTITIONS
    finally:
        await admin.close()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    sent_partition: dict[str, int] = {}
    try:
        for seq in range(PER_KEY):
            for key in KEYS:
                md = await producer.send_and_wait(
                    TOPIC, key=key.encode(), value=f"{key}:{seq}".encode()
                )
                # the default partitioner is a hash of the key: same key, same partition
                assert sent_partition.setdefault(key, md.partition) == md.partition
    finally:
        await producer.stop()
    assert len(set(sent_partition.values())) > 1

    consumer = AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id="servers-test",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=3000,  # below Kafka's default group.min.session.timeout.ms (6 s)
        heartbeat_interval_ms=500,
    )
    await consumer.start()
    received: dict[str, list[str]] = {}
    try:
        deadline = time.monotonic() + 60
        total = 0
        while total < len(KEYS) * PER_KEY and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for tp, records in batches.items():
                for rec in records:
                    assert rec.key is not None and rec.value is not None
                    key = rec.key.decode()
                    assert tp.partition == sent_partition[key]
                    received.setdefault(key, []).append(rec.value.decode())
                    total += 1
        await consumer.commit()
    finally:
        await consumer.stop()
    # every message once, in order per key
    assert received == {k: [f"{k}:{s}" for s in range(PER_KEY)] for k in KEYS}


def test_free_port_is_bindable() -> None:
    import socket

    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


async def test_tansu_roundtrip(tmp_path: Path) -> None:
    with TansuBroker(tmp_path) as broker:
        assert broker.running
        assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"
        await kafka_roundtrip(broker.bootstrap_servers)
        assert broker.log_path.exists()
    assert not broker.running


def test_tansu_kill_and_stop_are_idempotent(tmp_path: Path) -> None:
    broker = TansuBroker(tmp_path).start()
    pid = broker.pid
    assert pid is not None
    broker.kill()
    assert not broker.running
    broker.kill()
    broker.stop()
    broker.start()  # same port again
    assert broker.running and broker.pid != pid
    broker.stop()


def test_start_failure_reports_log_tail(tmp_path: Path) -> None:
    with TansuBroker(tmp_path) as first:
        second = TansuBroker(tmp_path / "second", port=first.port, startup_timeout=5)
        with pytest.raises(ServerStartError) as info:
            second.start()
        assert "already in use" in str(info.value)
        assert not second.running


def test_brokers_advertise_their_own_port_unless_told(tmp_path: Path) -> None:
    tansu = TansuBroker(tmp_path / "own")
    assert tansu.advertised_port == tansu.port
    assert f"tcp://{tansu.address}" in tansu._command()
    proxied = TansuBroker(tmp_path / "proxied", advertised_port=4242)
    command = proxied._command()
    assert command[command.index("--listener-url") + 1] == f"tcp://{proxied.address}"
    assert command[command.index("--advertised-listener-url") + 1] == "tcp://127.0.0.1:4242"
    if ApacheKafkaBroker.available():
        kafka = ApacheKafkaBroker(tmp_path / "kafka", advertised_port=4242)
        props = kafka.server_properties()
        assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:4242"
        assert f"PLAINTEXT://127.0.0.1:{kafka.port}" in props["listeners"]


kafka_needed = pytest.mark.skipif(
    not ApacheKafkaBroker.available(),
    reason="no Apache Kafka jars in the cache: run tools/kafka/fetch.sh "
    "or set MEMSTREAM_KAFKA_LIBS",
)


@pytest.fixture(scope="module")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafkaBroker]:
    if not ApacheKafkaBroker.available():
        pytest.skip("no Apache Kafka jars")
    with ApacheKafkaBroker(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


@kafka_needed
async def test_apache_kafka_roundtrip(apache_kafka: ApacheKafkaBroker) -> None:
    assert apache_kafka.startup_seconds is not None
    await kafka_roundtrip(apache_kafka.bootstrap_servers)


@kafka_needed
async def test_apache_kafka_idempotent_producer(apache_kafka: ApacheKafkaBroker) -> None:
    # Unlike tansu, the real broker supports idempotent producers.
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=apache_kafka.bootstrap_servers, enable_idempotence=True
    )
    await producer.start()
    try:
        md = await producer.send_and_wait("idempotent", key=b"k", value=b"v")
        assert md.offset == 0
    finally:
        await producer.stop()


def _mongo(uri: str) -> Any:
    from pymongo import MongoClient

    return MongoClient(uri, serverSelectionTimeoutMS=5000)


async def test_secantus_persists_across_restart(tmp_path: Path) -> None:
    data = tmp_path / "db"
    with SecantusServer(data) as server:
        assert server.uri == f"mongodb://127.0.0.1:{server.port}/"
        client = _mongo(server.uri)
        try:
            await asyncio.to_thread(
                client.memstream.facts.insert_one, {"_id": "f1", "text": "likes tea"}
            )
        finally:
            client.close()
        started = time.monotonic()
        server.stop()  # waits for the process to exit
        assert not server.running
        assert time.monotonic() - started < server.stop_timeout + 1

    with SecantusServer(data) as again:
        client = _mongo(again.uri)
        try:
            doc = client.memstream.facts.find_one({"_id": "f1"})
        finally:
            client.close()
    assert doc == {"_id": "f1", "text": "likes tea"}


def test_secantus_memory_and_kill(tmp_path: Path) -> None:
    server = SecantusServer(":memory:", workdir=tmp_path).start()
    try:
        client = _mongo(server.uri)
        assert client.admin.command("ping")["ok"] == 1
        client.close()
    finally:
        server.kill()
    assert not server.running
