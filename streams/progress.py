"""Every record of a partition, once and in order: the guard against records the consumer skipped.

faust-streaming 0.15.3 acknowledges records it never hands to the agent and commits past them.
`tests/streams/test_faust_skips_records.py` reproduces it with Faust alone, on both brokers, by
churning a second worker in the group of an app with a table (every memstream stage has one):

* after a rebalance, table recovery resumes the stream partitions *before* it seeks them back
  to the committed offsets (`faust/tables/recovery.py`, `on_recovery_completed`), so records
  keep arriving during the seek; the consumer then sees a jump in offsets, counts the whole gap
  as acknowledged (`Consumer._add_gap`), and resuming flow control clears the agents' queues, so
  the records delivered meanwhile are dropped unhandled — and the next commit is past them;
* records that arrive while flow control is paused or the generation changed are acked as
  skipped (`faust/streams.py`, the #216/#221 family);
* a re-fetched record below a stale read offset is dropped without an ack, leaving a commit
  short of the end (the quiet tail below).

A lost record is a lost memory. So every stage keeps, per input partition, the offset of the
last record it applied, in its own Faust table (written after the record's effects, so it
recovers with the stage's state and is never ahead of it). A record beyond the next expected
offset means records were skipped: the guard reads the missing ones back from the log with a
consumer of its own (no group, no commits) and hands them to the stage first, in order. Records
at or below the last applied offset were applied already (a redelivery) and are passed over.
Seeking Faust's consumer back instead is not reliable while records flow: Faust drops
re-fetched records below the offset it last read.

A skipped record with no later record in its partition reveals no gap. For that quiet tail
`reread_skipped` (run by a timer) compares the group's committed offsets (read through the
public consumer API, `streams.log_reader.CommittedOffsets`) with the progress: a commit beyond
the last applied record can only come from a skip, and in a quiet partition seeking back to the
first unapplied record (`Consumer.seek`, public on Faust's `ConsumerT`) is safe.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping
from typing import Any, Literal

from faust.types import TP, EventT

from streams.log_reader import CommittedOffsets, KafkaLogReader
from streams.records import InputRecord

log = logging.getLogger(__name__)

PROGRESS_KEY_PREFIX = b"\x00applied|"
"""Table keys of partition progress; never a session or user key (identifiers exclude NUL)."""
REREAD_CHECK_SECONDS = 5.0
"""How often each stage looks for commits beyond its progress (`PartitionGuard.reread_skipped`)."""

Verdict = Literal["apply", "applied-already", "fill-gap"]
LogReader = Callable[[TP, int, int], Awaitable[list[InputRecord]]]
"""`read(tp, start, end)`: records of `tp` with offsets in `[start, end)`, in order: all of them
or a first chunk (at least one record unless the range holds none)."""
CommitReader = Callable[[Collection[TP]], Awaitable[Mapping[TP, int | None]]]
"""`committed(partitions)`: the stage's consumer group's committed offset of each partition."""


def next_offset(last_applied: int | None) -> int:
    """The offset a partition's next record should have; 0 with no recorded progress."""
    return 0 if last_applied is None else last_applied + 1


def admit(last_applied: int | None, offset: int) -> Verdict:
    """What to do with the record at `offset`, given the partition's last applied offset.

    With no recorded progress the partition is expected to start at offset 0.
    """
    expected = next_offset(last_applied)
    if offset < expected:
        return "applied-already"
    if offset == expected:
        return "apply"
    return "fill-gap"


def unapplied_commits(
    committed: Mapping[TP, int | None], last_applied: Callable[[TP], int | None]
) -> dict[TP, int]:
    """Partitions committed past records never applied, with the offset to read again from."""
    behind: dict[TP, int] = {}
    for tp, offset in committed.items():
        expected = next_offset(last_applied(tp))
        if offset is not None and offset > expected:
            behind[tp] = expected
    return behind


def progress_key(tp: TP) -> bytes:
    """The table key under which a stage keeps the last applied offset of input partition `tp`."""
    return PROGRESS_KEY_PREFIX + f"{tp.topic}|{tp.partition}".encode()


def is_progress_key(key: bytes) -> bool:
    return key.startswith(PROGRESS_KEY_PREFIX)


class PartitionGuard:
    """Hands a stage each record of its input partitions once and in order.

    `table` is the stage's own Faust table (bytes keys and values); `read_log` reads skipped
    records back from the broker.
    """

    def __init__(
        self,
        table: MutableMapping[bytes, bytes | None],
        read_log: LogReader,
        *,
        stage: str,
        topics: Collection[str],
        read_commits: CommitReader | None = None,
    ) -> None:
        self._table = table
        self._read_log = read_log
        self._read_commits = read_commits
        self._stage = stage
        self._topics = frozenset(topics)

    def last_applied(self, tp: TP) -> int | None:
        stored = self._table.get(progress_key(tp))
        return int(stored) if stored else None

    def applied(self, record: InputRecord) -> None:
        """Record that the stage applied `record` (call after its effects are written)."""
        self._table[progress_key(record.tp)] = str(record.offset).encode()

    async def apply_in_order(
        self, event: EventT[bytes], apply: Callable[[InputRecord], Awaitable[None]]
    ) -> None:
        """`apply` this event's record, after any skipped ones before it (read from the log in
        chunks); record progress after each. A redelivered record is passed over."""
        record = InputRecord.from_event(event)
        while True:
            last = self.last_applied(record.tp)
            verdict = admit(last, record.offset)
            if verdict == "applied-already":
                return
            if verdict == "fill-gap":
                start = next_offset(last)
                missing = await self._read_log(record.tp, start, record.offset)
                log.warning(
                    "%s: the consumer skipped %s[%d] offsets %d..%d; applying %d from the log",
                    self._stage,
                    record.topic,
                    record.partition,
                    start,
                    record.offset - 1,
                    len(missing),
                )
                for skipped in missing:
                    await apply(skipped)
                    self.applied(skipped)
                if missing:
                    continue  # perhaps a first chunk: read on until the gap is closed
            await apply(record)  # next in line, or the rest of the gap is a hole in the log
            self.applied(record)
            return

    async def reread_skipped(self, app: Any) -> None:
        """Seek the consumer back where its group committed past records this stage never
        applied. `app` is the stage's Faust app; nothing happens while it rebalances or recovers.
        """
        if self._read_commits is None or app.rebalancing or app.tables.recovery.in_recovery:
            return
        assigned = [tp for tp in app.consumer.assignment() if tp.topic in self._topics]
        if not assigned:
            return
        committed = await self._read_commits(assigned)
        for tp, offset in unapplied_commits(committed, self.last_applied).items():
            log.warning(
                "%s: the group committed %s[%d] up to %s but applied only up to %d; re-reading",
                self._stage,
                tp.topic,
                tp.partition,
                committed[tp],
                offset - 1,
            )
            try:
                await app.consumer.seek(tp, offset)
            except Exception:  # the next check tries again
                log.exception("%s: seeking back to unapplied records failed", self._stage)


def guard_partitions(
    app: Any,
    table: MutableMapping[bytes, bytes | None],
    *,
    bootstrap_servers: str,
    stage: str,
    topics: Collection[str],
    group: str,
) -> PartitionGuard:
    """A `PartitionGuard` for a stage's Faust app (consumer group `group`), with its timer for
    the quiet tail."""
    guard = PartitionGuard(
        table,
        KafkaLogReader(bootstrap_servers),
        stage=stage,
        topics=topics,
        read_commits=CommittedOffsets(bootstrap_servers, group),
    )

    async def reread_skipped_records() -> None:
        await guard.reread_skipped(app)

    app.timer(REREAD_CHECK_SECONDS)(reread_skipped_records)
    return guard
