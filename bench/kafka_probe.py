"""Measuring a stage from outside: produce its input, watch its output, read its commits.

Reusable by any suite that runs a real stage worker (`memstream.runtime.pipeline.StageProcess`) and
needs
to know when something appeared on a topic, as seen by a client, when the stage's consumer
group had committed its input, and how much CPU a process used meanwhile (a figure the load of
a shared machine disturbs far less than a rate).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition

from memstream.runtime.pipeline import StageFailed, StageProcess


async def produce_all(
    bootstrap: str, topic: str, payloads: Sequence[tuple[bytes, bytes]], *, linger_ms: int = 5
) -> None:
    """Produce `(key, value)` records like the SDK does (`acks=all`, `linger_ms=5`) and wait
    until the broker has every one."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=linger_ms)
    await producer.start()
    try:
        futures = [await producer.send(topic, value, key=key) for key, value in payloads]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


@dataclass
class Arrival:
    """A record of the watched topic and when this process received it (`time.perf_counter`)."""

    record: ConsumerRecord[bytes, bytes]
    seen_at: float


@dataclass
class TopicTail:
    """Reads every partition of `topic` from the beginning, noting when each record arrived.

    `fetch_max_wait_ms` is small so that a record is seen within tens of milliseconds of the
    broker having it (aiokafka's default waits up to 500 ms on an empty fetch). With
    `from_end` it starts at the partitions' end offsets instead (on Tansu an end offset can be
    short after a multi-record batch, so a few earlier records may still arrive).
    """

    bootstrap: str
    topic: str
    partitions: int
    fetch_max_wait_ms: int = 20
    from_end: bool = False
    arrivals: list[Arrival] = field(default_factory=list)
    _consumer: AIOKafkaConsumer | None = None
    _task: asyncio.Task[None] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> TopicTail:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=self.fetch_max_wait_ms,
        )
        await consumer.start()
        partitions = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        consumer.assign(partitions)
        if self.from_end:
            await consumer.seek_to_end(*partitions)
        else:
            await consumer.seek_to_beginning(*partitions)
        self._consumer = consumer
        self._task = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self._consumer is not None
        while True:
            batches = await self._consumer.getmany(timeout_ms=50)
            now = time.perf_counter()
            for records in batches.values():
                self.arrivals.extend(Arrival(record, now) for record in records)
            if batches:
                self._changed.set()

    async def wait_until(
        self, done: Callable[[list[Arrival]], bool], timeout: float, what: str
    ) -> float:
        """Wait until `done(arrivals)`; returns the arrival time of the record that made it so."""
        deadline = time.monotonic() + timeout
        while not done(self.arrivals):
            if self._task is not None and self._task.done():
                self._task.result()  # the reader failed: raise its error
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{what}: not done after {timeout:.0f} s")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 1.0))
        return self.arrivals[-1].seen_at if self.arrivals else time.perf_counter()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()


async def committed_at_end(
    bootstrap: str, group: str, topic: str, partitions: int, timeout: float
) -> float:
    """Poll `group`'s committed offsets of `topic` until every partition is committed to its end
    offset; returns when that was first seen (`time.perf_counter`)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while True:
            committed = [await consumer.committed(tp) for tp in tps]
            if all((c or 0) >= ends[tp] for c, tp in zip(committed, tps, strict=True)):
                return time.perf_counter()
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {group} committed {committed} of {list(ends.values())}")
            await asyncio.sleep(0.05)
    finally:
        await consumer.stop()


async def wait_ready(worker: StageProcess, timeout: float, poll: float = 0.005) -> float:
    """Poll the worker's log for its ready marker (printed as Faust resumes its partitions and
    starts fetching); returns when it was seen (`time.perf_counter`)."""
    deadline = time.monotonic() + timeout
    while not worker.is_ready():
        if not worker.running:
            raise StageFailed(f"worker {worker.stage} exited:\n{worker.log_tail()}")
        if time.monotonic() > deadline:
            raise StageFailed(f"worker {worker.stage} not ready after {timeout:.0f} s")
        await asyncio.sleep(poll)
    return time.perf_counter()


def parse_cpu_seconds(stat: str, ticks_per_second: int) -> float:
    """User + system CPU seconds from the text of `/proc/<pid>/stat` (fields 14 and 15; the
    command name in parentheses may itself hold spaces or parentheses)."""
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / ticks_per_second


def cpu_seconds(pid: int | None) -> float | None:
    """CPU seconds process `pid` has used so far (Linux only: None elsewhere or when gone)."""
    if pid is None:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return parse_cpu_seconds(stat, os.sysconf("SC_CLK_TCK"))
