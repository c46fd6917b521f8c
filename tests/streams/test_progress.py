"""The partition guard: records applied once and in order, rewinds over skipped records."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from faust.types import TP

from streams.progress import (
    MAX_REWINDS,
    REWIND_PATIENCE_SECONDS,
    Gap,
    PartitionGuard,
    admit,
    is_progress_key,
    progress_key,
)

TURNS = TP("turns", 2)


def test_the_next_offset_is_applied() -> None:
    assert admit(4, 5, None, now=0).verdict == "apply"


def test_a_fresh_partition_starts_at_offset_zero() -> None:
    assert admit(None, 0, None, now=0).verdict == "apply"
    assert admit(None, 3, None, now=0).verdict == "rewind"


def test_a_redelivered_record_is_passed_over_and_keeps_the_gap() -> None:
    gap = Gap(expected=5, seen=7, rewinds=1, rewound_at=0)
    admission = admit(4, 3, gap, now=1)
    assert admission.verdict == "applied-already"
    assert admission.gap == gap


def test_a_skipped_record_rewinds_to_the_first_missing_offset() -> None:
    admission = admit(4, 7, None, now=10)
    assert admission.verdict == "rewind"
    assert admission.gap == Gap(expected=5, seen=7, rewinds=1, rewound_at=10)


def test_newer_records_fetched_before_the_rewind_wait() -> None:
    gap = admit(4, 7, None, now=10).gap
    assert admit(4, 8, gap, now=10.5).verdict == "wait"
    assert admit(4, 9, gap, now=10.6).verdict == "wait"


def test_the_missing_record_arriving_closes_the_gap() -> None:
    gap = admit(4, 7, None, now=10).gap
    admission = admit(4, 5, gap, now=10.2)
    assert admission.verdict == "apply"
    assert admission.gap is None


def test_after_the_patience_runs_out_it_rewinds_again() -> None:
    gap = admit(4, 7, None, now=10).gap
    admission = admit(4, 9, gap, now=10 + REWIND_PATIENCE_SECONDS)
    assert admission.verdict == "rewind"
    assert admission.gap is not None and admission.gap.rewinds == 2


def test_a_hole_in_the_log_is_accepted_after_repeated_rewinds() -> None:
    """The record that showed the gap comes back first after each rewind: nothing is before it."""
    admission = admit(4, 7, None, now=0)
    for rewind in range(2, MAX_REWINDS + 1):
        admission = admit(4, 7, admission.gap, now=0.1 * rewind)
        assert admission.verdict == "rewind"
        assert admission.gap is not None and admission.gap.rewinds == rewind
    accepted = admit(4, 7, admission.gap, now=1)
    assert accepted.verdict == "apply"
    assert accepted.accepted_hole
    assert accepted.gap is None


def test_a_new_gap_replaces_an_old_one() -> None:
    old = Gap(expected=3, seen=6, rewinds=2, rewound_at=0)
    admission = admit(4, 9, old, now=1)
    assert admission.verdict == "rewind"
    assert admission.gap == Gap(expected=5, seen=9, rewinds=1, rewound_at=1)


def test_progress_keys_never_look_like_session_keys() -> None:
    key = progress_key(TURNS)
    assert is_progress_key(key)
    assert not is_progress_key(b"ann|s1")


@dataclass
class Message:
    tp: TP
    offset: int


@dataclass
class Event:
    message: Message


@dataclass
class Consumer:
    seeks: list[dict[TP, int]] = field(default_factory=list)

    async def seek_wait(self, partitions: dict[TP, int]) -> None:
        self.seeks.append(dict(partitions))


@dataclass
class App:
    consumer: Consumer = field(default_factory=Consumer)


def run_guard(guard: PartitionGuard, offsets: list[int]) -> list[int]:
    """Offer records in order; apply (and record) the admitted ones; return what was applied."""
    applied: list[int] = []

    async def offer() -> None:
        for offset in offsets:
            event: Any = Event(Message(TURNS, offset))
            if await guard.admit(event):
                applied.append(offset)
                guard.applied(event)

    asyncio.run(offer())
    return applied


@pytest.fixture
def clock() -> list[float]:
    return [100.0]


def test_guard_rewinds_the_consumer_and_applies_every_record_once(clock: list[float]) -> None:
    app = App()
    table: dict[bytes, bytes | None] = {}
    guard = PartitionGuard(app, table, stage="window", monotonic=lambda: clock[0])  # type: ignore[arg-type]
    # 0 and 1 applied; 2 skipped by the consumer; 3 and 4 were already fetched; then the rewind
    # delivers 2, 3, 4 again; a redelivered 1 is passed over.
    applied = run_guard(guard, [0, 1, 3, 4, 2, 3, 4, 1])
    assert applied == [0, 1, 2, 3, 4]
    assert app.consumer.seeks == [{TURNS: 2}]
    assert table[progress_key(TURNS)] == b"4"
    assert guard.last_applied(TURNS) == 4


def test_guard_resumes_from_the_recovered_table(clock: list[float]) -> None:
    table: dict[bytes, bytes | None] = {progress_key(TURNS): b"6"}
    app = App()
    guard = PartitionGuard(app, table, stage="window", monotonic=lambda: clock[0])  # type: ignore[arg-type]
    # The consumer committed past offsets it never applied (7 and 8) and starts at 9.
    assert run_guard(guard, [9, 10]) == []
    assert app.consumer.seeks == [{TURNS: 7}]
    assert run_guard(guard, [7, 8, 9, 10]) == [7, 8, 9, 10]
