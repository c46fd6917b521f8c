"""The embedded log benchmark's workload and accounting (bench/embedded_log.py): ~200-byte keyed
records produced with aiokafka, read back from the beginning, and the RSS and CPU time of a
process tree read from /proc (Linux only)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

PARTITIONS = 4
RECORD_BYTES = 200
TOPIC_BATCHED = "bench.batched"
TOPIC_SINGLE = "bench.single"
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


# -- process tree accounting (/proc; Linux only) ----------------------------------------------


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                kids.append(int(entry.name))
    return kids


def _tree(pids: list[int]) -> list[int]:
    seen: list[int] = []
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.append(pid)
            todo.extend(_children(pid))
    return seen


def tree_rss_mb(pids: list[int]) -> float:
    """Resident memory of ``pids`` and all their descendants, in MB."""
    total_kb = 0
    for pid in _tree(pids):
        with contextlib.suppress(OSError, IndexError, ValueError):
            total_kb += int((Path("/proc") / str(pid) / "statm").read_text().split()[1]) * _PAGE_KB
    return round(total_kb / 1024, 1)


def tree_cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) used so far by ``pids`` and their descendants."""
    ticks = 0
    for pid in _tree(pids):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
    return round(ticks / _CLK_TCK, 2)


# -- workload -----------------------------------------------------------------------------------


def records(count: int) -> list[tuple[bytes, bytes]]:
    """``count`` (key, value) pairs: 100 session-like keys, ~200-byte JSON values with an index."""
    out = []
    for i in range(count):
        head = f'{{"i":{i},"content":"'
        value = head + "x" * (RECORD_BYTES - len(head) - 2) + '"}'
        out.append((f"user-{i % 20}|session-{i % 100}".encode(), value.encode()))
    return out


async def create_topics(bootstrap: str) -> str:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        topics = [NewTopic(t, PARTITIONS, 1) for t in (TOPIC_BATCHED, TOPIC_SINGLE)]
        await admin.create_topics(topics)
        return "created"
    except Exception as exc:  # Tansu auto-creates unknown topics with 4 partitions anyway
        return f"create_topics failed ({exc!r}); relying on auto-creation"
    finally:
        await admin.close()


async def produce(
    bootstrap: str, topic: str, data: list[tuple[bytes, bytes]], max_batch_size: int | None
) -> float:
    """Records/s for sending ``data`` with ``acks=all`` and waiting for every acknowledgement."""
    options: dict[str, Any] = {} if max_batch_size is None else {"max_batch_size": max_batch_size}
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=5,
        enable_idempotence=False,
        **options,
    )
    await producer.start()
    try:
        # Topic metadata first, so the timed part is producing only.
        await producer.partitions_for(topic)
        started = time.perf_counter()
        futures = [await producer.send(topic, value, key=key) for key, value in data]
        await asyncio.gather(*futures)
        elapsed = time.perf_counter() - started
    finally:
        await producer.stop()
    return round(len(data) / elapsed, 1)


@dataclass
class Consumed:
    """What reading both topics from the beginning found."""

    distinct: dict[str, int] = field(default_factory=dict)
    total: int = 0
    seconds: float = 0.0


async def consume(bootstrap: str, expected: dict[str, int], idle: float) -> Consumed:
    """Read both topics from the beginning until ``expected`` records each (distinct record
    indexes) or nothing new for ``idle`` seconds."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    await consumer.start()
    seen: dict[str, set[int]] = {topic: set() for topic in expected}
    result = Consumed()
    try:
        partitions = [TopicPartition(t, p) for t in expected for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        started = last_new = time.perf_counter()
        while any(len(seen[t]) < n for t, n in expected.items()):
            batches = await consumer.getmany(timeout_ms=200, max_records=10_000)
            now = time.perf_counter()
            for tp, batch in batches.items():
                for message in batch:
                    seen[tp.topic].add(json.loads(message.value)["i"])
                    result.total += 1
            if batches:
                last_new = now
            elif now - last_new > idle:
                break
        result.seconds = last_new - started
    finally:
        await consumer.stop()
    result.distinct = {topic: len(indexes) for topic, indexes in seen.items()}
    return result
