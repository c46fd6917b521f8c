"""Every record of a partition, in order: the guard against records the consumer skipped.

Faust can acknowledge a record without handing it to the agent, and then commit past it: a record
fetched before a rebalance is skipped when it arrives while flow control is paused or the
consumer generation changed (the faust-streaming #216/#221 family), and the consumer seeks to the
committed offset afterwards. Its commit may also run before a table's changelog writes leave the
producer buffer (`flush_atmost` gives up after 0.1 s). Either way a record is lost for good, which
a memory pipeline cannot afford: a lost turn is a lost memory.

So every stage keeps, per input partition, the offset of the last record it applied, in state that
recovers with the stage (a key in the stage's own table). A record beyond the next expected offset
means records were skipped: the stage seeks back to the first missing one and lets newer records
pass by until it arrives. The pure decision is `admit()`; `PartitionGuard` applies it.

A gap that survives `MAX_REWINDS` rewinds is a real hole in the log (transaction markers,
compaction, retention) and is accepted with a warning. Records at or below the last applied
offset were applied already (a redelivery) and are passed over.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, replace
from typing import Literal

import faust
from faust.types import TP, EventT

log = logging.getLogger(__name__)

MAX_REWINDS = 3
"""Rewinds to the same missing offset before the gap is accepted as a hole in the log."""
REWIND_PATIENCE_SECONDS = 5.0
"""How long newer records are passed by after a rewind before rewinding again."""
PROGRESS_KEY_PREFIX = b"\x00applied|"
"""Table keys of partition progress; never a session or user key (identifiers exclude NUL)."""

Verdict = Literal["apply", "applied-already", "rewind", "wait"]


@dataclass(frozen=True)
class Gap:
    """Records from `expected` on are missing; the stage rewound to them `rewinds` times.

    `seen` is the offset of the record that showed the gap: fetched again after a rewind, with
    nothing before it, it is evidence that the log has a hole there.
    """

    expected: int
    seen: int
    rewinds: int
    rewound_at: float


@dataclass(frozen=True)
class Admission:
    """What to do with one record, and the partition's gap afterwards."""

    verdict: Verdict
    gap: Gap | None
    accepted_hole: bool = False


def admit(
    last_applied: int | None,
    offset: int,
    gap: Gap | None,
    *,
    now: float,
    max_rewinds: int = MAX_REWINDS,
    patience: float = REWIND_PATIENCE_SECONDS,
) -> Admission:
    """Decide about the record at `offset` given the partition's last applied offset.

    `now` is a monotonic time in seconds. With no recorded progress the partition is expected
    to start at offset 0.
    """
    expected = (last_applied if last_applied is not None else -1) + 1
    if offset < expected:
        return Admission("applied-already", gap)
    if offset == expected:
        return Admission("apply", None)
    if gap is None or gap.expected != expected:
        return Admission("rewind", Gap(expected, seen=offset, rewinds=1, rewound_at=now))
    refetched = offset == gap.seen
    if not refetched and now - gap.rewound_at < patience:
        return Admission("wait", gap)  # newer records fetched before the rewind took effect
    if gap.rewinds >= max_rewinds:
        return Admission("apply", None, accepted_hole=True)
    return Admission("rewind", replace(gap, seen=offset, rewinds=gap.rewinds + 1, rewound_at=now))


def progress_key(tp: TP) -> bytes:
    """The table key under which a stage keeps the last applied offset of input partition `tp`."""
    return PROGRESS_KEY_PREFIX + f"{tp.topic}|{tp.partition}".encode()


def is_progress_key(key: bytes) -> bool:
    return key.startswith(PROGRESS_KEY_PREFIX)


class PartitionGuard:
    """Admits each record of a stage's input partitions once and in order; rewinds over gaps.

    `table` is the stage's own Faust table (bytes keys and values), so progress recovers with
    the stage's state and, written after it, is never ahead of it.
    """

    def __init__(
        self,
        app: faust.App,
        table: MutableMapping[bytes, bytes | None],
        *,
        stage: str,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._app = app
        self._table = table
        self._stage = stage
        self._monotonic = monotonic
        self._gaps: dict[TP, Gap] = {}

    def last_applied(self, tp: TP) -> int | None:
        stored = self._table.get(progress_key(tp))
        return int(stored) if stored else None

    async def admit(self, event: EventT[bytes]) -> bool:
        """True if the agent should apply this record now; rewinds the consumer over a gap."""
        message = event.message
        tp = message.tp
        admission = admit(
            self.last_applied(tp), message.offset, self._gaps.get(tp), now=self._monotonic()
        )
        if admission.gap is None:
            self._gaps.pop(tp, None)
        else:
            self._gaps[tp] = admission.gap
        if admission.accepted_hole:
            log.warning(
                "%s: %s[%d] has no records before offset %d that were expected; accepting the hole",
                self._stage,
                tp.topic,
                tp.partition,
                message.offset,
            )
        if admission.verdict == "rewind":
            assert admission.gap is not None
            log.warning(
                "%s: %s[%d] skipped records %d..%d; rewinding to %d (rewind %d)",
                self._stage,
                tp.topic,
                tp.partition,
                admission.gap.expected,
                message.offset - 1,
                admission.gap.expected,
                admission.gap.rewinds,
            )
            await self._app.consumer.seek_wait({tp: admission.gap.expected})
        return admission.verdict == "apply"

    def applied(self, event: EventT[bytes]) -> None:
        """Record that the agent applied this record (call after its effects are written)."""
        self._table[progress_key(event.message.tp)] = str(event.message.offset).encode()
