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
public consumer API, `streams.log_reader.CommittedOffsets`) with the progress. A commit below
the last applied record is held by records Faust never saw acknowledged (read back by the guard,
or applied before a restart and dropped on redelivery): the applied offsets are acknowledged to
Faust (`streams.acknowledgements`), so its next commit moves past them. A commit beyond the last
applied record can only come from a skip, and in a quiet partition seeking back to the first
unapplied record (`Consumer.seek`, public on Faust's `ConsumerT`; it resets the offset below
which Faust drops re-fetched records) is safe. A tail the consumer fetched and dropped without
committing past it shows in the partition's end offset instead: when the end stays beyond the
next expected offset for two checks in a row while the stage is idle (nothing being applied,
nothing admitted into that partition), the records are not coming, and the guard seeks back to
them too.

The stages no longer apply one record at a time. The window and the projector apply *batches*
(`admitted` turns a batch of events into the records to apply, in order, redeliveries dropped
and gaps filled; the stage stores the progress after the batch's effects are written). A memory
type's stage runs many records at once, one user's in order (`streams.concurrency`): its
progress is the *contiguous prefix* of finished records (`FinishedPrefix`), so a record that
finished while an earlier one is still in flight is not counted until the earlier one is, and
a crash redoes at most what was in flight. `admitted` keeps, per partition, the next offset it
expects in memory (from the stored progress at first sight of the partition, or after
`forget` on a rebalance): in a concurrent stage records are admitted before they finish.
"""

from __future__ import annotations

import logging
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import contextmanager
from typing import Any, Protocol

from faust.types import TP, TableT

from streams.acknowledgements import acknowledge_offsets, applied_beyond_commits
from streams.kafka_security import KafkaSecurity
from streams.log_reader import CommittedOffsets, KafkaLogReader
from streams.metrics import CONSUMER_LAG
from streams.records import InputRecord
from streams.table_keys import progress_key
from streams.tables import set_in_partition

log = logging.getLogger(__name__)

REREAD_CHECK_SECONDS = 5.0
"""How often each stage looks for commits beyond its progress (`PartitionGuard.reread_skipped`)."""
LAG_CHECK_SECONDS = 15.0
"""How often each stage measures its consumer lag (`PartitionGuard.measure_lag`)."""

LogReader = Callable[[TP, int, int], Awaitable[list[InputRecord]]]
"""`read(tp, start, end)`: records of `tp` with offsets in `[start, end)`, in order: all of them
or a first chunk (at least one record unless the range holds none)."""
CommitReader = Callable[[Collection[TP]], Awaitable[Mapping[TP, int | None]]]
"""`committed(partitions)`: the stage's consumer group's committed offset of each partition."""


def next_offset(last_applied: int | None) -> int:
    """The offset a partition's next record should have; 0 with no recorded progress."""
    return 0 if last_applied is None else last_applied + 1


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


def highest_offsets(records: Iterable[InputRecord]) -> dict[TP, int]:
    """The last offset of each partition among `records` (the progress a batch makes)."""
    highest: dict[TP, int] = {}
    for record in records:
        highest[record.tp] = max(record.offset, highest.get(record.tp, -1))
    return highest


class ProgressStore(Protocol):
    """Where a stage keeps the last applied offset of each input partition: its table
    (`TableProgress`), or the database its effects go to (the projector's)."""

    async def last_applied(self, tp: TP) -> int | None: ...

    async def store(self, offsets: Mapping[TP, int]) -> None:
        """Record these partitions' last applied offsets (after their effects are written)."""
        ...


class TableProgress:
    """Progress in the stage's own Faust table, each partition's in the changelog partition of
    the same number, so it recovers with the stage's state and is never ahead of it (written
    after the effects)."""

    def __init__(self, table: TableT[bytes, bytes | None]) -> None:
        self._table = table

    async def last_applied(self, tp: TP) -> int | None:
        stored = self._table.get(progress_key(tp))
        return int(stored) if stored else None

    async def store(self, offsets: Mapping[TP, int]) -> None:
        for tp, offset in offsets.items():
            set_in_partition(self._table, tp.partition, progress_key(tp), str(offset).encode())


class FinishedPrefix:
    """A concurrent stage's records per partition, admitted in offset order and finished in any
    order: `finished` says how far the contiguous prefix of finished records reaches."""

    def __init__(self) -> None:
        self._running: dict[TP, dict[int, bool]] = {}

    def started(self, record: InputRecord) -> None:
        self._running.setdefault(record.tp, {})[record.offset] = False

    def finished(self, record: InputRecord) -> int | None:
        """Mark `record` finished; the partition's new last applied offset if the prefix of
        finished records grew, else None."""
        running = self._running.get(record.tp)
        if running is None or record.offset not in running:
            return None  # its partition was revoked meanwhile
        running[record.offset] = True
        reached = None
        for offset in list(running):  # insertion order is offset order
            if not running[offset]:
                break
            del running[offset]
            reached = offset
        return reached

    def in_flight(self, tp: TP) -> int:
        return len(self._running.get(tp, {}))

    def forget(self, tps: Iterable[TP]) -> None:
        for tp in tps:
            self._running.pop(tp, None)


class PartitionGuard:
    """Hands a stage each record of its input partitions once and in order.

    `progress` is where the stage keeps its applied offsets; `read_log` reads skipped records
    back from the broker.
    """

    def __init__(
        self,
        progress: ProgressStore,
        read_log: LogReader,
        *,
        stage: str,
        topics: Collection[str],
        read_commits: CommitReader | None = None,
    ) -> None:
        self.progress = progress
        self._read_log = read_log
        self._read_commits = read_commits
        self._stage = stage
        self._topics = frozenset(topics)
        self._next: dict[TP, int] = {}
        self._working = 0
        self._waiting: dict[TP, int] = {}
        """Partitions whose end was beyond the next expected offset at the last check (idle)."""

    @property
    def stage(self) -> str:
        return self._stage

    async def measure_lag(self, consumer: Any) -> None:
        """Record each assigned input partition's lag (`streams.metrics.CONSUMER_LAG`): its
        end as the broker reports it, minus the next offset this stage will apply."""
        assigned = [tp for tp in consumer.assignment() if tp.topic in self._topics]
        if not assigned:
            return
        ends = await consumer.highwaters(*assigned)
        for tp in assigned:
            applied = await self.progress.last_applied(tp)
            pending = max(0, int(ends.get(tp, 0)) - (applied + 1 if applied is not None else 0))
            CONSUMER_LAG.labels(self._stage, tp.topic, str(tp.partition)).set(pending)

    @contextmanager
    def working(self) -> Iterator[None]:
        """Around the stage applying admitted records: a quiet tail is judged only when idle."""
        self._working += 1
        try:
            yield
        finally:
            self._working -= 1

    async def last_applied(self, tp: TP) -> int | None:
        return await self.progress.last_applied(tp)

    def forget(self, tps: Iterable[TP]) -> None:
        """After a rebalance: the next expected offsets are read from the progress again."""
        for tp in tps:
            self._next.pop(tp, None)

    async def admitted(self, records: Sequence[InputRecord]) -> list[InputRecord]:
        """The records to apply for `records` (a batch from the consumer, in its order), each
        partition's in offset order: redelivered ones dropped, and before a record beyond the
        next expected offset the ones the consumer skipped, read back from the log (in chunks)."""
        admitted: list[InputRecord] = []
        for record in records:
            tp = record.tp
            expected = self._next.get(tp)
            if expected is None:
                expected = next_offset(await self.progress.last_applied(tp))
            if record.offset < expected:
                continue  # applied already, or admitted and still in flight
            while expected < record.offset:
                missing = await self._read_log(tp, expected, record.offset)
                if not missing:
                    break  # the rest of the gap is a hole in the log
                log.warning(
                    "%s: the consumer skipped %s[%d] offsets %d..%d; applying %d from the log",
                    self._stage,
                    tp.topic,
                    tp.partition,
                    expected,
                    record.offset - 1,
                    len(missing),
                )
                admitted.extend(missing)
                expected = missing[-1].offset + 1
            admitted.append(record)
            self._next[tp] = record.offset + 1
        return admitted

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
        applied = {tp: await self.progress.last_applied(tp) for tp in committed}
        held = applied_beyond_commits(committed, applied.get)
        if acknowledged := acknowledge_offsets(app.consumer, held):
            log.info(
                "%s: acknowledged %d applied offsets the commit was below",
                self._stage,
                acknowledged,
            )
        behind = unapplied_commits(committed, applied.get)
        for tp, offset in behind.items():
            log.warning(
                "%s: the group committed %s[%d] up to %s but applied only up to %d; re-reading",
                self._stage,
                tp.topic,
                tp.partition,
                committed[tp],
                offset - 1,
            )
            await self._seek(app, tp, offset)
        await self._reread_quiet_tails(app, [tp for tp in assigned if tp not in behind], applied)

    async def _reread_quiet_tails(
        self, app: Any, assigned: Sequence[TP], applied: Mapping[TP, int | None]
    ) -> None:
        """Seek back to records that wait at a partition's end and have not come for a whole
        check while the stage was idle (fetched and dropped by the consumer, never committed)."""
        if self._working or not assigned:
            self._waiting.clear()
            return
        try:
            ends = await app.consumer.highwaters(*assigned)
        except Exception:  # a broker outage must not crash the timer: the next check tries again
            log.warning("%s: reading end offsets failed; tails checked later", self._stage)
            return
        waiting: dict[TP, int] = {}
        for tp in assigned:
            expected = self._next.get(tp, next_offset(applied.get(tp)))
            end = ends.get(tp)
            if end is None or end <= expected:
                continue
            if self._waiting.get(tp) != expected:
                waiting[tp] = expected  # maybe still on its way: judged at the next check
                continue
            log.warning(
                "%s: %s[%d] holds records from %d to %d the consumer did not deliver; re-reading",
                self._stage,
                tp.topic,
                tp.partition,
                expected,
                end - 1,
            )
            await self._seek(app, tp, expected)
        self._waiting = waiting

    async def _seek(self, app: Any, tp: TP, offset: int) -> None:
        try:
            await app.consumer.seek(tp, offset)
        except Exception:  # the next check tries again
            log.exception("%s: seeking back to unapplied records failed", self._stage)


def guard_partitions(
    app: Any,
    progress: ProgressStore,
    *,
    bootstrap_servers: str,
    security: KafkaSecurity,
    stage: str,
    topics: Collection[str],
    group: str,
) -> PartitionGuard:
    """A `PartitionGuard` for a stage's Faust app (consumer group `group`), with its timer for
    the quiet tail."""
    guard = PartitionGuard(
        progress,
        KafkaLogReader(bootstrap_servers, security=security),
        stage=stage,
        topics=topics,
        read_commits=CommittedOffsets(bootstrap_servers, group, security=security),
    )

    async def reread_skipped_records() -> None:
        await guard.reread_skipped(app)

    async def measure_lag() -> None:
        if app.rebalancing:
            return
        try:
            await guard.measure_lag(app.consumer)
        except Exception:  # a broker outage: the gauge keeps its last values
            log.debug("%s: measuring the consumer lag failed", stage, exc_info=True)

    async def forget_revoked(sender: Any, revoked: Collection[TP], **_: Any) -> None:
        guard.forget(revoked)  # another worker may move them on before they come back

    app.timer(REREAD_CHECK_SECONDS)(reread_skipped_records)
    app.timer(LAG_CHECK_SECONDS)(measure_lag)
    app.on_partitions_revoked.connect(forget_revoked)
    return guard
