"""The partition guard: records applied once and in order, skipped ones read back from the log."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from faust.types import TP

from streams.progress import (
    PartitionGuard,
    admit,
    is_progress_key,
    progress_key,
    unapplied_commits,
)
from streams.records import InputRecord

TURNS = TP("turns", 2)


def test_the_next_offset_is_applied() -> None:
    assert admit(4, 5) == "apply"


def test_a_fresh_partition_starts_at_offset_zero() -> None:
    assert admit(None, 0) == "apply"
    assert admit(None, 3) == "fill-gap"


def test_a_redelivered_record_is_passed_over() -> None:
    assert admit(4, 4) == "applied-already"
    assert admit(4, 0) == "applied-already"


def test_a_record_beyond_the_next_offset_reveals_a_gap() -> None:
    assert admit(4, 7) == "fill-gap"


def test_progress_keys_never_look_like_session_keys() -> None:
    key = progress_key(TURNS)
    assert is_progress_key(key)
    assert not is_progress_key(b"ann|s1")


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


def deliver(guard: PartitionGuard, offsets: list[int]) -> list[int]:
    """Offer the consumer's records in order; apply what the guard admits; return its offsets."""
    applied: list[int] = []

    async def apply(record: InputRecord) -> None:
        applied.append(record.offset)

    async def offer() -> None:
        for offset in offsets:
            await guard.apply_in_order(event_at(offset), apply)

    asyncio.run(offer())
    return applied


def test_records_the_consumer_skipped_are_read_from_the_log_first() -> None:
    log, table = Log(), dict[bytes, bytes | None]()
    guard = PartitionGuard(table, log, stage="window", topics=["turns"])
    # 2 and 3 were acknowledged by the consumer without reaching the stage; 1 is redelivered.
    assert deliver(guard, [0, 1, 4, 5, 1]) == [0, 1, 2, 3, 4, 5]
    assert log.reads == [(2, 4)]
    assert table[progress_key(TURNS)] == b"5"
    assert guard.last_applied(TURNS) == 5


def test_a_hole_in_the_log_is_passed_over() -> None:
    log = Log(holes={3})  # a transaction marker, a compacted record
    guard = PartitionGuard({}, log, stage="window", topics=["turns"])
    assert deliver(guard, [0, 1, 2, 4]) == [0, 1, 2, 4]
    assert log.reads == [(3, 4)]


def test_a_long_gap_is_read_in_chunks() -> None:
    log = Log(holes={6}, chunk=2)
    guard = PartitionGuard({}, log, stage="projector", topics=["turns"])
    assert deliver(guard, [0, 8]) == [0, 1, 2, 3, 4, 5, 7, 8]
    assert log.reads == [(1, 8), (3, 8), (5, 8)]  # the last chunk, 5 and 7, closes the gap


def test_progress_recovers_with_the_table() -> None:
    """After a restart the consumer may start past records that were never applied."""
    log = Log()
    table: dict[bytes, bytes | None] = {progress_key(TURNS): b"6"}
    guard = PartitionGuard(table, log, stage="window", topics=["turns"])
    assert deliver(guard, [9, 10]) == [7, 8, 9, 10]
    assert log.reads == [(7, 9)]


def test_a_partition_without_progress_is_read_from_its_start() -> None:
    log = Log()
    guard = PartitionGuard({}, log, stage="projector", topics=["turns"])
    assert deliver(guard, [2]) == [0, 1, 2]


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


@dataclass
class Consumer:
    """A Faust consumer's public surface the guard uses: its assignment and `seek`."""

    assigned: set[TP]
    seeks: list[dict[TP, int]] = field(default_factory=list)

    def assignment(self) -> set[TP]:
        return self.assigned

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
    table: dict[bytes, bytes | None] = {progress_key(TURNS): b"4"}
    read = commits({TURNS: 6, TP("snapshots", 2): 9})
    guard = PartitionGuard(table, Log(), stage="window", topics=["turns"], read_commits=read)
    app = App(Consumer({TURNS, TP("snapshots", 2)}))
    asyncio.run(guard.reread_skipped(app))
    assert app.consumer.seeks == [{TURNS: 5}]
    assert read.asked == [{TURNS}]  # only the stage's own input partitions


def test_nothing_is_read_again_while_rebalancing_or_when_up_to_date() -> None:
    table: dict[bytes, bytes | None] = {progress_key(TURNS): b"4"}
    rebalancing = App(Consumer({TURNS}), rebalancing=True)
    up_to_date = App(Consumer({TURNS}))
    for app, offsets in ((rebalancing, {TURNS: 6}), (up_to_date, {TURNS: 5})):
        guard = PartitionGuard(
            table, Log(), stage="window", topics=["turns"], read_commits=commits(offsets)
        )
        asyncio.run(guard.reread_skipped(app))
    assert rebalancing.consumer.seeks == up_to_date.consumer.seeks == []
