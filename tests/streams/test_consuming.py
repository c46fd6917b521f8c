"""How a stage consumes: records the partition guard read back from the log are acknowledged to
Faust's consumer once applied, so the group's commit moves past them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import faust
from faust.types import TP, Message

from streams.consuming import ConcurrentRecords, acknowledge_read_back, apply_batches
from streams.progress import PartitionGuard
from streams.records import InputRecord
from tests.streams.test_progress import Log, Progress, event_at

TURNS = TP("turns", 2)


@dataclass
class Consumer:
    """What a stage's Faust consumer was told was acknowledged: (partition, offset) pairs."""

    acked: list[tuple[int, int]] = field(default_factory=list)

    def ack(self, message: Message) -> bool:
        self.acked.append((message.partition, message.offset))
        return True


@dataclass
class Stream:
    """A Faust stream as the stages use it: batches (`take_events`), or events one by one
    (`noack().events()`) acknowledged by the stage (`ack`)."""

    batches: list[list[int]]
    app: Any = None
    acked_events: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.app = type("App", (), {"consumer": Consumer()})()

    async def take_events(self, _max: int, _within: float) -> AsyncIterator[list[Any]]:
        for batch in self.batches:
            yield [event_at(offset) for offset in batch]

    def noack(self) -> Stream:
        return self

    async def events(self) -> AsyncIterator[Any]:
        for batch in self.batches:
            for offset in batch:
                yield event_at(offset)

    async def ack(self, event: Any) -> None:
        self.acked_events.append(event.message.offset)


def test_a_batch_stage_acknowledges_the_records_read_back_for_a_gap_after_applying_them() -> None:
    stream = Stream([[0, 1], [5]])  # 2..4 never delivered
    guard = PartitionGuard(Progress(), Log(), stage="projector", topics=["turns"])
    applied: list[int] = []
    acked_while_applying: list[list[tuple[int, int]]] = []

    async def apply(records: Sequence[InputRecord]) -> None:
        acked_while_applying.append(list(stream.app.consumer.acked))
        applied.extend(record.offset for record in records)

    asyncio.run(apply_batches(stream, guard, apply, max_records=10, within=0.1))  # type: ignore[arg-type]
    assert applied == [0, 1, 2, 3, 4, 5]
    assert acked_while_applying == [[], []]  # acknowledged after their effects, not before
    assert sorted(stream.app.consumer.acked) == [(2, 2), (2, 3), (2, 4)]


def test_a_concurrent_stage_acknowledges_read_back_records_and_delivered_events_apart() -> None:
    stream = Stream([[0], [3]])  # 1 and 2 never delivered
    progress = Progress()
    guard = PartitionGuard(progress, Log(), stage="extract-semantic", topics=["turns"])
    records = ConcurrentRecords(guard, progress, limit=4)
    applied: list[int] = []

    async def apply(record: InputRecord) -> None:
        applied.append(record.offset)

    async def run() -> None:
        await records.consume(stream, apply)  # type: ignore[arg-type]
        await records.tasks.drain()

    asyncio.run(run())
    assert applied == [0, 1, 2, 3]
    assert stream.acked_events == [0, 3]
    assert stream.app.consumer.acked == [(2, 1), (2, 2)]
    assert progress.applied == {TURNS: 3}


def test_faust_commits_past_read_back_records_only_once_they_are_acknowledged() -> None:
    """Faust's own consumer (its private commit arithmetic, `_new_offset`, pinned here): with
    7..14 acknowledged above a commit at 3, nothing is committable; after the guard's read-back
    3..6 are acknowledged, the commit moves to 15."""

    async def run() -> tuple[int | None, int | None]:
        app = faust.App("consuming-test", broker="kafka://localhost:1")
        app.topics.add(app.topic("turns", value_serializer="raw"))
        await app.topics._update_indices()  # type: ignore[attr-defined]
        consumer: Any = app.consumer  # private attributes below
        tp = TP("turns", 0)
        consumer._committed_offset[tp] = 3
        for offset in range(7, 15):
            consumer.ack(Message("turns", 0, offset, 0.0, 0, None, None, None, None))
        stuck = consumer._new_offset(tp)
        read_back = [InputRecord("turns", 0, offset, None, b"{}") for offset in range(3, 7)]
        acknowledge_read_back(consumer, read_back)
        return stuck, consumer._new_offset(tp)

    assert asyncio.run(run()) == (None, 15)
