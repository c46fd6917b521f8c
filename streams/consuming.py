"""How a stage's agent consumes its stream: in batches, or record by record many at once.

Both hand the stage only what the partition guard admits (`streams.progress`), and both mark
an input done only after its effects are written: progress is stored, and Faust acknowledges
the record (its commit covers only the contiguous prefix of acknowledged offsets).

* `apply_batches` (the window, the projector): up to `max_records` records, or what arrived
  within `within` seconds, applied together by the stage — one round trip to MongoDB or one
  wait for the broker's acknowledgements per batch instead of per record. Faust's
  `take_events` acknowledges the batch's events after the stage returned.
* `apply_concurrently` (a memory type's stage): each record is a task of its own
  (`streams.concurrency.KeyedTasks`: one key's records in order); a finished record advances
  the stored progress only as far as every earlier record of its partition has finished
  (`FinishedPrefix`), and its event is acknowledged then. At a rebalance the revoked
  partitions' tasks are cancelled before the partitions move (`on_revoked`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from functools import partial
from typing import Any, cast

import faust
from faust.types import TP, EventT

from streams.acknowledgements import acknowledge_offsets
from streams.concurrency import KeyedTasks
from streams.metrics import RECORDS_IN
from streams.progress import FinishedPrefix, PartitionGuard, ProgressStore
from streams.records import InputRecord

log = logging.getLogger(__name__)

BatchApply = Callable[[Sequence[InputRecord]], Awaitable[None]]
RecordApply = Callable[[InputRecord], Awaitable[None]]


async def apply_batches(
    stream: faust.StreamT[bytes],
    guard: PartitionGuard,
    apply: BatchApply,
    *,
    max_records: int,
    within: float,
) -> None:
    """Apply the stream in batches: `apply(records)` writes their effects and stores their
    progress (the events are acknowledged when it returns)."""
    async for events in cast(faust.Stream[bytes], stream).take_events(max_records, within):
        delivered = [InputRecord.from_event(event) for event in events]
        records = await guard.admitted(delivered)
        RECORDS_IN.labels(guard.stage).inc(len(records))
        if records:
            with guard.working():
                await apply(records)
            read_back = set(records).difference(delivered)
            acknowledge_read_back(stream.app.consumer, read_back)


def acknowledge_read_back(consumer: Any, records: Iterable[InputRecord]) -> None:
    """Acknowledge to Faust's consumer the records the partition guard read back from the log
    and the stage applied: Faust never delivered them, so the stream never acknowledges them
    (`streams.acknowledgements`)."""
    offsets: dict[TP, list[int]] = {}
    for record in records:
        offsets.setdefault(record.tp, []).append(record.offset)
    acknowledge_offsets(consumer, offsets)


class ConcurrentRecords:
    """A memory type's stage's records in flight: started in order, finished in any order."""

    def __init__(self, guard: PartitionGuard, progress: ProgressStore, limit: int) -> None:
        self.guard = guard
        self.progress = progress
        self.tasks = KeyedTasks(limit)
        self.prefix = FinishedPrefix()

    async def consume(self, stream: faust.StreamT[bytes], apply: RecordApply) -> None:
        """Read the stream without acknowledging, start each admitted record as a task of its
        key (the record key: the user on the snapshots topic)."""
        unacked = cast(faust.Stream[bytes], stream).noack()
        async for event in unacked.events():
            record = InputRecord.from_event(event)
            admitted = await self.guard.admitted([record])
            RECORDS_IN.labels(self.guard.stage).inc(len(admitted))
            if not admitted or admitted[-1].offset != record.offset:
                await unacked.ack(event)  # a redelivery: applied already, or still in flight
            for todo in admitted:
                acked = event if todo.offset == record.offset else None
                self.prefix.started(todo)
                run = partial(self._run, unacked, apply, todo, acked)
                await self.tasks.submit(todo.key or b"", todo.partition, run)

    async def _run(
        self,
        stream: faust.StreamT[bytes],
        apply: RecordApply,
        record: InputRecord,
        event: EventT[bytes] | None,
    ) -> None:
        with self.guard.working():
            await apply(record)
            reached = self.prefix.finished(record)
            if reached is not None:
                await self.progress.store({record.tp: reached})
        if event is not None:
            await stream.ack(event)
        else:
            acknowledge_read_back(stream.app.consumer, [record])

    async def drain(self, seconds: float) -> None:
        """At shutdown (the consumer stopped): let the records in flight finish for up to
        `seconds` — their results are written, so when they come again (not committed) they
        are found written and cost no LLM call — then cancel what is left."""
        pending = self.tasks.pending
        if not pending:
            return
        log.info("draining %d records in flight (at most %.0f s)", pending, seconds)
        try:
            await asyncio.wait_for(self.tasks.drain(), seconds)
        except TimeoutError:
            left = await self.tasks.cancel(self.tasks.partitions)
            log.warning(
                "abandoned %d records in flight after %.0f s (they come again)", left, seconds
            )
        except Exception:
            log.exception("a record in flight failed while draining")

    async def on_revoked(self, app: Any, revoked: Collection[TP]) -> None:
        """Stop the revoked partitions' records (they were not acknowledged: they come again)
        and flush what they sent, so the next owner reads it in the log."""
        partitions = {tp.partition for tp in revoked}
        cancelled = await self.tasks.cancel(partitions)
        self.prefix.forget(revoked)
        self.guard.forget(revoked)
        if cancelled:
            log.info("stopped %d records in flight of revoked partitions", cancelled)
        await app.producer.flush()
