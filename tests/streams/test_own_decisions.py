"""A memory type's stage's own records the read model may not hold yet (`OwnDecisions`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from faust.types import TP

from events.codec import encode
from streams import own_decisions
from streams.own_decisions import OwnDecisions
from streams.records import InputRecord
from tests import factories as f

TOPIC = "memories"


@dataclass
class Log:
    """The memories topic as the broker has it: (partition, offset) → event."""

    records: dict[tuple[int, int], Any] = field(default_factory=dict)
    tail_reads: list[tuple[int, int]] = field(default_factory=list)

    async def read_tail(self, tp: TP, start: int) -> list[InputRecord]:
        self.tail_reads.append((tp.partition, start))
        return [
            InputRecord(TOPIC, partition, offset, event.key.encode(), encode(event))
            for (partition, offset), event in sorted(self.records.items())
            if partition == tp.partition and offset >= start
        ]


@dataclass
class ReadModel:
    projected: dict[int, int | None] = field(default_factory=dict)

    def projected_offsets(self, partitions: Any) -> dict[int, int | None]:
        return {p: self.projected.get(p) for p in partitions}


def own(log: Log, read_model: ReadModel) -> OwnDecisions:
    return OwnDecisions(log, TOPIC, "semantic", read_model)  # type: ignore[arg-type]


def test_at_first_sight_a_partition_keeps_its_own_records_after_the_projected_offset() -> None:
    mine_done, mine_open = f.extracted(), f.extracted(f.snapshot())
    other_type = f.extracted(memory_type="episodic")
    log = Log({(2, 4): mine_done, (2, 7): other_type, (2, 9): mine_open})
    decisions = own(log, ReadModel({2: 4}))
    asyncio.run(decisions.ready(2))
    assert log.tail_reads == [(2, 5)]
    assert decisions.find(mine_open.event_id) == mine_open
    assert decisions.find(mine_done.event_id) is None  # the read model holds it
    assert decisions.find(other_type.event_id) is None  # another stage's
    assert decisions.held == 1


def test_a_partition_the_projector_never_reached_is_read_from_its_start() -> None:
    log = Log({(0, 0): f.extracted()})
    decisions = own(log, ReadModel())
    asyncio.run(decisions.ready(0))
    assert log.tail_reads == [(0, 0)] and decisions.held == 1


def test_a_users_records_come_in_the_order_they_were_written() -> None:
    decisions = own(Log(), ReadModel())
    first, second, other = (
        f.extracted(),
        f.extracted(f.snapshot()),
        f.extracted(f.snapshot(user_id="someone-else")),
    )
    decisions.add(1, 3, first)
    decisions.add(1, 4, other)
    decisions.add(1, 8, second)
    assert decisions.of_user(f.USER_ID) == [first, second]


def test_what_the_projector_applied_is_dropped_on_refresh(monkeypatch: Any) -> None:
    monkeypatch.setattr(own_decisions, "REFRESH_SECONDS", 0.0)
    read_model = ReadModel({1: None})
    decisions = own(Log(), read_model)
    first, second = f.extracted(), f.extracted(f.snapshot())
    decisions.add(1, 3, first)
    decisions.add(1, 8, second)
    read_model.projected[1] = 5
    asyncio.run(decisions.refresh(1))
    assert decisions.of_user(f.USER_ID) == [second]
    assert decisions.find(first.event_id) is None


def test_a_rebalance_forgets_the_partition_and_reads_it_again_when_needed() -> None:
    result = f.extracted()
    log = Log({(3, 0): result})
    decisions = own(log, ReadModel())
    asyncio.run(decisions.ready(3))
    decisions.forget([3])
    assert decisions.held == 0
    asyncio.run(decisions.ready(3))
    assert log.tail_reads == [(3, 0), (3, 0)] and decisions.find(result.event_id) == result
