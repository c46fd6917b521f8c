"""The partition guard: records applied once and in order, skipped ones read back from the log."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from faust.types import TP

from streams.acknowledgements import applied_beyond_commits
from streams.progress import FinishedPrefix, PartitionGuard, unapplied_commits
from streams.records import InputRecord

TURNS = TP("turns", 2)


@dataclass
class Progress:
    """A stage's stored progress (its table, in the stages), as a plain mapping."""

    applied: dict[TP, int] = field(default_factory=dict)

    async def last_applied(self, tp: TP) -> int | None:
        return self.applied.get(tp)

    async def store(self, offsets: dict[TP, int]) -> None:
        self.applied.update(offsets)


@dataclass
class Message:
    topic: str
    partition: int
    offset: int
    key: bytes | None = b"ann|s1"
    headers: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass
class Event:
    message: Message
    value: bytes = b"{}"


def event_at(offset: int) -> Any:
    return Event(Message(TURNS.topic, TURNS.partition, offset))


@dataclass
class Log:
    """The partition as the broker has it: `holes` are offsets with no record."""

    holes: set[int] = field(default_factory=set)
    chunk: int = 100
    reads: list[tuple[int, int]] = field(default_factory=list)

    async def __call__(self, tp: TP, start: int, end: int) -> list[InputRecord]:
        self.reads.append((start, end))
        records = [
            InputRecord(tp.topic, tp.partition, offset, b"ann|s1", b"{}")
            for offset in range(start, end)
            if offset not in self.holes
        ]
        return records[: self.chunk]


def record_at(offset: int) -> InputRecord:
    return InputRecord(TURNS.topic, TURNS.partition, offset, b"ann|s1", b"{}")


def deliver(guard: PartitionGuard, batches: list[list[int]]) -> list[int]:
    """Offer the consumer's records in batches; apply what the guard admits and store the
    progress after each batch, as a batch stage does; return the applied offsets."""
    applied: list[int] = []

    async def offer() -> None:
        for batch in batches:
            admitted = await guard.admitted([record_at(offset) for offset in batch])
            applied.extend(record.offset for record in admitted)
            if admitted:
                await guard.progress.store({TURNS: admitted[-1].offset})

    asyncio.run(offer())
    return applied


def test_records_the_consumer_skipped_are_read_from_the_log_first() -> None:
    log, progress = Log(), Progress()
    guard = PartitionGuard(progress, log, stage="window", topics=["turns"])
    # 2 and 3 were acknowledged by the consumer without reaching the stage; 1 is redelivered.
    assert deliver(guard, [[0, 1], [4], [5, 1]]) == [0, 1, 2, 3, 4, 5]
    assert log.reads == [(2, 4)]
    assert progress.applied == {TURNS: 5}


def test_a_redelivery_inside_one_batch_is_admitted_once() -> None:
    guard = PartitionGuard(Progress(), Log(), stage="window", topics=["turns"])
    assert deliver(guard, [[0, 1, 1, 2, 0]]) == [0, 1, 2]


def test_a_hole_in_the_log_is_passed_over() -> None:
    log = Log(holes={3})  # a transaction marker, a compacted record
    guard = PartitionGuard(Progress(), log, stage="window", topics=["turns"])
    assert deliver(guard, [[0, 1, 2], [4]]) == [0, 1, 2, 4]
    assert log.reads == [(3, 4)]


def test_a_long_gap_is_read_in_chunks() -> None:
    log = Log(holes={6}, chunk=2)
    guard = PartitionGuard(Progress(), log, stage="projector", topics=["turns"])
    assert deliver(guard, [[0], [8]]) == [0, 1, 2, 3, 4, 5, 7, 8]
    assert log.reads == [(1, 8), (3, 8), (5, 8)]  # the last chunk, 5 and 7, closes the gap


def test_progress_recovers_with_the_table() -> None:
    """After a restart the consumer may start past records that were never applied."""
    log = Log()
    guard = PartitionGuard(Progress({TURNS: 6}), log, stage="window", topics=["turns"])
    assert deliver(guard, [[9, 10]]) == [7, 8, 9, 10]
    assert log.reads == [(7, 9)]


def test_a_partition_without_progress_is_read_from_its_start() -> None:
    log = Log()
    guard = PartitionGuard(Progress(), log, stage="projector", topics=["turns"])
    assert deliver(guard, [[2]]) == [0, 1, 2]


def test_records_admitted_and_still_in_flight_are_not_admitted_again() -> None:
    """A concurrent stage admits records before they finish: the stored progress is behind."""
    progress = Progress()
    guard = PartitionGuard(progress, Log(), stage="extract-semantic", topics=["turns"])

    async def offer() -> list[int]:
        first = await guard.admitted([record_at(0), record_at(1)])
        again = await guard.admitted([record_at(1), record_at(2)])  # 0 and 1 still running
        return [r.offset for r in [*first, *again]]

    assert asyncio.run(offer()) == [0, 1, 2]
    assert progress.applied == {}


def test_after_a_rebalance_the_next_offset_comes_from_the_stored_progress() -> None:
    progress = Progress()
    guard = PartitionGuard(progress, Log(), stage="extract-semantic", topics=["turns"])

    async def offer() -> list[int]:
        await guard.admitted([record_at(0), record_at(1)])  # cancelled at the rebalance
        guard.forget([TURNS])
        return [r.offset for r in await guard.admitted([record_at(0), record_at(1)])]

    assert asyncio.run(offer()) == [0, 1]


def test_the_finished_prefix_grows_only_when_every_earlier_record_finished() -> None:
    prefix = FinishedPrefix()
    records = [record_at(offset) for offset in (3, 4, 5, 7)]
    for record in records:
        prefix.started(record)
    assert prefix.finished(records[1]) is None  # 4 done, 3 still running
    assert prefix.finished(records[3]) is None
    assert prefix.finished(records[0]) == 4  # 3 and 4
    assert prefix.finished(records[2]) == 7  # 5, then 7 (6 was never started: a hole)
    assert prefix.in_flight(TURNS) == 0


def test_a_record_of_a_revoked_partition_advances_nothing() -> None:
    prefix = FinishedPrefix()
    prefix.started(record_at(0))
    prefix.forget([TURNS])
    assert prefix.finished(record_at(0)) is None


def test_input_record_from_a_faust_event() -> None:
    record = InputRecord.from_event(event_at(3))
    assert record == InputRecord("turns", 2, 3, b"ann|s1", b"{}")
    assert record.tp == TURNS
    assert record.position == "turns[2]@3"


def test_commits_beyond_the_progress_are_found() -> None:
    applied = {TURNS: 4, TP("turns", 0): 9}
    committed: dict[TP, int | None] = {
        TURNS: 7,  # 5 and 6 were committed but never applied
        TP("turns", 0): 10,  # up to date
        TP("turns", 1): None,  # nothing committed yet
        TP("turns", 3): 2,  # no progress at all: read from 0
    }
    assert unapplied_commits(committed, applied.get) == {TURNS: 5, TP("turns", 3): 0}


def test_applied_records_the_group_has_not_committed_past_are_found() -> None:
    applied = {TURNS: 4, TP("turns", 0): 9, TP("turns", 1): 2, TP("turns", 3): 20_000}
    committed: dict[TP, int | None] = {
        TURNS: 3,  # 3 and 4 applied, the commit still at 3
        TP("turns", 0): 10,  # up to date
        TP("turns", 1): None,  # applied 0..2, nothing committed
        TP("turns", 4): None,  # nothing applied, nothing committed
        TP("turns", 3): 5,  # far behind: caught up in steps
    }
    assert applied_beyond_commits(committed, applied.get, at_most=100) == {
        TURNS: range(3, 5),
        TP("turns", 1): range(0, 3),
        TP("turns", 3): range(5, 105),
    }


def test_a_commit_below_the_progress_is_caught_up_by_acknowledging_the_applied_offsets() -> None:
    """A record applied before a restart and dropped unacknowledged on its redelivery, with no
    later record in its partition: nothing else would ever move the group's commit past it."""
    guard = PartitionGuard(
        Progress({TURNS: 4}),
        Log(),
        stage="extract-semantic",
        topics=["turns"],
        read_commits=commits({TURNS: 3}),
    )
    app = App(Consumer({TURNS}, ends={TURNS: 5}))
    asyncio.run(guard.reread_skipped(app))
    assert app.consumer.acked == [(TURNS, 3), (TURNS, 4)]
    assert app.consumer.seeks == []


@dataclass
class Consumer:
    """A Faust consumer's public surface the guard uses: its assignment, end offsets, `seek`,
    `ack`."""

    assigned: set[TP]
    seeks: list[dict[TP, int]] = field(default_factory=list)
    ends: dict[TP, int] = field(default_factory=dict)
    acked: list[tuple[TP, int]] = field(default_factory=list)

    def assignment(self) -> set[TP]:
        return self.assigned

    def ack(self, message: Any) -> bool:
        self.acked.append((message.tp, message.offset))
        return True

    async def highwaters(self, *partitions: TP) -> dict[TP, int]:
        return {tp: self.ends[tp] for tp in partitions if tp in self.ends}

    async def seek(self, tp: TP, offset: int) -> None:
        self.seeks.append({tp: offset})


@dataclass
class Recovery:
    in_recovery: bool = False


@dataclass
class Tables:
    recovery: Recovery = field(default_factory=Recovery)


@dataclass
class App:
    consumer: Consumer
    rebalancing: bool = False
    tables: Tables = field(default_factory=Tables)


def commits(offsets: dict[TP, int | None]) -> Any:
    """The group's committed offsets, as `CommittedOffsets` reads them from the broker."""
    asked: list[set[TP]] = []

    async def read(partitions: Any) -> dict[TP, int | None]:
        asked.append(set(partitions))
        return {tp: offsets.get(tp) for tp in partitions}

    read.asked = asked  # type: ignore[attr-defined]
    return read


def test_a_quiet_partition_committed_past_its_progress_is_read_again() -> None:
    read = commits({TURNS: 6, TP("snapshots", 2): 9})
    guard = PartitionGuard(
        Progress({TURNS: 4}), Log(), stage="window", topics=["turns"], read_commits=read
    )
    app = App(Consumer({TURNS, TP("snapshots", 2)}))
    asyncio.run(guard.reread_skipped(app))
    assert app.consumer.seeks == [{TURNS: 5}]
    assert read.asked == [{TURNS}]  # only the stage's own input partitions


def test_nothing_is_read_again_while_rebalancing_or_when_up_to_date() -> None:
    rebalancing = App(Consumer({TURNS}), rebalancing=True)
    up_to_date = App(Consumer({TURNS}))
    for app, offsets in ((rebalancing, {TURNS: 6}), (up_to_date, {TURNS: 5})):
        guard = PartitionGuard(
            Progress({TURNS: 4}),
            Log(),
            stage="window",
            topics=["turns"],
            read_commits=commits(offsets),
        )
        asyncio.run(guard.reread_skipped(app))
    assert rebalancing.consumer.seeks == up_to_date.consumer.seeks == []


def test_records_at_a_quiet_end_not_delivered_for_a_whole_check_while_idle_are_read_again() -> None:
    guard = PartitionGuard(
        Progress({TURNS: 4}), Log(), stage="window", topics=["turns"], read_commits=commits({})
    )
    app = App(Consumer({TURNS}, ends={TURNS: 8}))
    asyncio.run(guard.reread_skipped(app))
    assert app.consumer.seeks == []  # maybe still on their way
    asyncio.run(guard.reread_skipped(app))
    assert app.consumer.seeks == [{TURNS: 5}]


def test_a_quiet_end_is_not_judged_while_the_stage_applies_or_after_it_admitted_more() -> None:
    guard = PartitionGuard(
        Progress({TURNS: 4}), Log(), stage="window", topics=["turns"], read_commits=commits({})
    )
    app = App(Consumer({TURNS}, ends={TURNS: 8}))
    asyncio.run(guard.reread_skipped(app))
    with guard.working():
        asyncio.run(guard.reread_skipped(app))
    asyncio.run(guard.reread_skipped(app))
    assert app.consumer.seeks == []  # the idle checks were not in a row
    asyncio.run(guard.admitted([record_at(5)]))
    asyncio.run(guard.reread_skipped(app))
    assert app.consumer.seeks == []  # it moved on since the last check
    asyncio.run(guard.reread_skipped(app))
    assert app.consumer.seeks == [{TURNS: 6}]
    app.consumer.ends = {TURNS: 6}
    asyncio.run(guard.reread_skipped(app))
    asyncio.run(guard.reread_skipped(app))
    assert app.consumer.seeks == [{TURNS: 6}]  # up to the end: nothing waits


def test_a_failed_end_offset_read_skips_the_quiet_tail_check_without_raising() -> None:
    class Unreachable(Consumer):
        async def highwaters(self, *partitions: TP) -> dict[TP, int]:
            raise ConnectionError("broker down")

    guard = PartitionGuard(
        Progress({TURNS: 4}), Log(), stage="window", topics=["turns"], read_commits=commits({})
    )
    app = App(Unreachable({TURNS}))
    asyncio.run(guard.reread_skipped(app))
    asyncio.run(guard.reread_skipped(app))
    assert app.consumer.seeks == []
