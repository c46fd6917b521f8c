"""Reading the log directly, beside a stage's Faust consumer: ranges, tails, committed offsets.

Each read uses an aiokafka consumer of its own, with no group membership and nothing committed,
so it never disturbs the stage's consumer group. Broker outages are waited out
(`streams.retrying`): a stage cannot go on without these records.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection

from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.types import TP

from streams.kafka_security import PLAINTEXT, KafkaSecurity
from streams.records import InputRecord
from streams.retrying import through_outages

log = logging.getLogger(__name__)

QUIET_FETCH_MS = 500
"""A fetch that returns nothing for this long, at or past the reported end, ends a tail read."""


AHEAD_CONSUMERS = 4
"""Consumers kept for look-aheads (`read_ahead`): a memory type's stage looks ahead twice per
snapshot, many snapshots at once, and starting a consumer costs a connection and a metadata
round trip — more than the read itself."""


class KafkaLogReader:
    """Reads records of one partition: a range (`__call__`), everything from an offset to the
    end (`read_tail`), or a short look ahead (`read_ahead`, on kept consumers)."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        security: KafkaSecurity = PLAINTEXT,
        fetch_timeout_ms: int = 1000,
        chunk: int = 500,
    ) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._security = security
        self._fetch_timeout_ms = fetch_timeout_ms
        self._chunk = chunk
        self._idle: list[AIOKafkaConsumer] = []
        self._kept = 0
        self._returned = asyncio.Condition()

    async def __call__(self, tp: TP, start: int, end: int) -> list[InputRecord]:
        """Records of `tp` with offsets in `[start, end)`, in order: all of them, or a first
        chunk of at most `chunk` records (at least one unless the range holds none)."""
        return await through_outages(
            lambda: self._read(TopicPartition(tp.topic, tp.partition), start, end),
            f"reading {tp.topic}[{tp.partition}] {start}..{end - 1} back",
        )

    async def read_tail(self, tp: TP, start: int) -> list[InputRecord]:
        """Every record of `tp` from `start` to the end of the partition, in order.

        Reads on past the end offset the broker reports until a fetch comes back empty, because
        Tansu reports too small an end after multi-record batches.
        """
        return await through_outages(
            lambda: self._read_tail(TopicPartition(tp.topic, tp.partition), start),
            f"reading {tp.topic}[{tp.partition}] from {start}",
        )

    async def read_ahead(self, tp: TP, start: int, limit: int) -> list[InputRecord]:
        """At most `limit` records of `tp` from `start`, up to the end the broker reports now
        (a best-effort look ahead: on Tansu, whose end offsets can be too small after
        multi-record batches, the last records may be missed)."""
        return await through_outages(
            lambda: self._read_ahead(TopicPartition(tp.topic, tp.partition), start, limit),
            f"reading {tp.topic}[{tp.partition}] ahead from {start}",
        )

    async def close(self) -> None:
        """Stop the kept look-ahead consumers (at shutdown)."""
        idle, self._idle = self._idle, []
        self._kept -= len(idle)
        for consumer in idle:
            await consumer.stop()

    def _consumer(self) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap_servers,
            **self._security.client_options(),
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # records before the log start are gone: read from it
        )

    async def _read(self, tp: TopicPartition, start: int, end: int) -> list[InputRecord]:
        consumer = self._consumer()
        await consumer.start()
        try:
            consumer.assign([tp])
            consumer.seek(tp, start)
            records: list[InputRecord] = []
            while True:
                batches = await consumer.getmany(tp, timeout_ms=self._fetch_timeout_ms)
                for fetched in batches.get(tp, []):
                    if fetched.offset >= end:
                        return records  # the record that revealed the gap exists: all read
                    if fetched.offset >= start:
                        records.append(InputRecord.from_consumer_record(fetched))
                    if len(records) >= self._chunk:
                        return records
        finally:
            await consumer.stop()

    async def _read_ahead(self, tp: TopicPartition, start: int, limit: int) -> list[InputRecord]:
        consumer = await self._borrow()
        try:
            records = await self._read_ahead_with(consumer, tp, start, limit)
        except BaseException:
            self._kept -= 1  # a consumer that failed (or was cancelled mid-read) is not reused
            await consumer.stop()
            async with self._returned:
                self._returned.notify()
            raise
        async with self._returned:
            self._idle.append(consumer)
            self._returned.notify()
        return records

    async def _borrow(self) -> AIOKafkaConsumer:
        """An idle kept consumer, a new one while fewer than `AHEAD_CONSUMERS` are kept, else
        the next one returned."""
        async with self._returned:
            while not self._idle and self._kept >= AHEAD_CONSUMERS:
                await self._returned.wait()
            if self._idle:
                return self._idle.pop()
            self._kept += 1
        consumer = self._consumer()
        try:
            await consumer.start()
        except BaseException:
            self._kept -= 1
            await consumer.stop()
            raise
        return consumer

    async def _read_ahead_with(
        self, consumer: AIOKafkaConsumer, tp: TopicPartition, start: int, limit: int
    ) -> list[InputRecord]:
        consumer.assign([tp])  # a kept consumer reads one partition at a time
        stop = min((await consumer.end_offsets([tp]))[tp], start + limit)
        records: list[InputRecord] = []
        if start >= stop:
            return records
        consumer.seek(tp, start)
        while await consumer.position(tp) < stop:
            batches = await consumer.getmany(tp, timeout_ms=self._fetch_timeout_ms)
            fetched = batches.get(tp, [])
            if not fetched:
                return records
            records.extend(
                InputRecord.from_consumer_record(r) for r in fetched if start <= r.offset < stop
            )
        return records

    async def _read_tail(self, tp: TopicPartition, start: int) -> list[InputRecord]:
        consumer = self._consumer()
        await consumer.start()
        try:
            consumer.assign([tp])
            consumer.seek(tp, start)
            end = (await consumer.end_offsets([tp]))[tp]
            records: list[InputRecord] = []
            while True:
                batches = await consumer.getmany(tp, timeout_ms=QUIET_FETCH_MS)
                fetched = batches.get(tp, [])
                records.extend(
                    InputRecord.from_consumer_record(r) for r in fetched if r.offset >= start
                )
                if not fetched and await consumer.position(tp) >= end:
                    return records
        finally:
            await consumer.stop()


class CommittedOffsets:
    """What a consumer group has committed, read with the public `committed()` API of a consumer
    that carries the group id but never subscribes (so it never joins or rebalances the group;
    works on Tansu, which lacks the admin API for group offsets). The consumer is started once
    and kept; a failure drops it, and the next call starts a new one."""

    def __init__(
        self, bootstrap_servers: str, group: str, *, security: KafkaSecurity = PLAINTEXT
    ) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._security = security
        self._group = group
        self._consumer: AIOKafkaConsumer | None = None

    async def __call__(self, partitions: Collection[TP]) -> dict[TP, int | None]:
        """The group's committed offset of each partition; a broker outage is waited out (it
        used to escape the stage's timer and crash the worker)."""
        return await through_outages(
            lambda: self._committed(partitions), f"reading group {self._group}'s commits"
        )

    async def _committed(self, partitions: Collection[TP]) -> dict[TP, int | None]:
        if self._consumer is None:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self._bootstrap_servers,
                **self._security.client_options(),
                group_id=self._group,
                enable_auto_commit=False,
            )
            try:
                await consumer.start()
            except BaseException:
                await consumer.stop()
                raise
            self._consumer = consumer
        try:
            return {
                tp: await self._consumer.committed(TopicPartition(tp.topic, tp.partition))
                for tp in partitions
            }
        except BaseException:
            consumer, self._consumer = self._consumer, None
            await consumer.stop()
            raise
