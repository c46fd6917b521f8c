"""The projector stage: every event topic into the MongoDB read model (docs/architecture.md).

Records come in batches (`streams.consuming.apply_batches`: up to `BATCH_RECORDS`, or what
arrived within `BATCH_SECONDS`), each read with the same validation as the stage that owns its
topic (`handlers.inputs`): a turn the window dead-lettered, or a snapshot an extractor refused,
is not projected either; a record whose content key was destroyed is forgotten and not
projected. A batch is projected in bulk (`projections.batch`: one bulk per collection, the
database left as record by record would leave it), cut at each forgetting record, whose keys are
destroyed after everything before it is projected and before anything after it is read. An
event the read model refuses — an id that already names other content, a memories-topic record
that is not an event — is kept in `dead_letters` with the reason. Then the batch's progress is
stored, in the read model (`ReadModelProgress`): never before its writes. Database outages are
waited out (`streams.retrying`) and a batch interrupted by one is projected again, as a
redelivery, so no event is ever skipped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import faust
from faust.types import TP
from pymongo.database import Database

from events.codec import AnyEvent, decode
from events.forgetting import MemoriesForgotten, SessionForgotten, UserForgotten
from handlers.failures import is_outage
from handlers.inputs import InvalidRecord, read_snapshots_record, read_turns_record
from handlers.key_ring import StoreKeyRing, with_keys
from handlers.ports import DataKeys
from handlers.sealed_events import KeyNotCached, opener
from handlers.sealing import KeyDestroyed
from projections import LiveWrites, ensure_indexes, project_batch
from projections.key_erasure import KeyForgetting, destroy_forgotten_keys
from projections.progress import store_progress, topic_offsets
from streams import metrics
from streams.app import faust_app, raw_table
from streams.consuming import apply_batches
from streams.dead_letters import dead_letter_record
from streams.faults import fault_point
from streams.progress import TableProgress, guard_partitions, highest_offsets
from streams.records import InputRecord
from streams.retrying import through_outages
from streams.settings import Clock, StreamSettings, utc_now

log = logging.getLogger(__name__)
STAGE = "projector"
BATCH_RECORDS = 500
BATCH_SECONDS = 0.05
Read = AnyEvent | Exception | None
"""A record read: its event, its poison, or None (not to be projected)."""
Failed = tuple[InputRecord, Exception]
"""A record the projector could not project, and why (it is dead-lettered)."""


class ReadModelProgress:
    """The projector's progress, kept in the read model (`projections.progress`) and cached;
    a partition the read model has no progress for falls back to what the projector's table
    recorded before progress moved to the read model (`fallback`)."""

    def __init__(self, db: Database[dict[str, Any]], fallback: TableProgress) -> None:
        self._db = db
        self._fallback = fallback
        self._known: dict[TP, int | None] = {}
        self._stored: dict[str, dict[int, int]] = {}
        """What the read model held for each topic read so far (one query per topic)."""

    async def last_applied(self, tp: TP) -> int | None:
        if tp not in self._known:
            if tp.topic not in self._stored:
                self._stored[tp.topic] = await through_outages(
                    partial(asyncio.to_thread, topic_offsets, self._db, tp.topic),
                    f"reading the projector's progress on {tp.topic}",
                )
            offset = self._stored[tp.topic].get(tp.partition)
            if offset is None:
                offset = await self._fallback.last_applied(tp)
            self._known[tp] = offset
        return self._known[tp]

    async def store(self, offsets: Mapping[TP, int]) -> None:
        by_partition = {(tp.topic, tp.partition): offset for tp, offset in offsets.items()}
        await through_outages(
            partial(asyncio.to_thread, store_progress, self._db, by_partition),
            "storing the projector's progress",
        )
        self._known.update(offsets)

    def forget(self) -> None:
        """After a rebalance another projector may have moved a partition on: read again."""
        self._known.clear()
        self._stored.clear()


class ProjectorStage:
    """The projector's steps over its topics, the read model, its progress and the data keys
    forgetting destroys."""

    def __init__(
        self,
        app: faust.App,
        settings: StreamSettings,
        db: Database[dict[str, Any]],
        data_keys: DataKeys,
        clock: Clock,
    ) -> None:
        topics = settings.topics
        self.topics = topics
        self.db = db
        self.clock = clock
        self.data_keys = data_keys
        self.events = app.topic(
            topics.turns,
            topics.snapshots,
            topics.memories,
            topics.dead_letters,
            key_type=bytes,
            value_type=bytes,
        )
        applied_offsets = raw_table(app, "applied-offsets", settings)  # progress before 0.3
        self.progress = ReadModelProgress(db, TableProgress(applied_offsets))
        self.ring = StoreKeyRing(data_keys)
        self.writes = LiveWrites(db)
        self.guard = guard_partitions(
            app,
            self.progress,
            bootstrap_servers=settings.bootstrap_servers,
            security=settings.security,
            stage=STAGE,
            topics=[topics.turns, topics.snapshots, topics.memories, topics.dead_letters],
            group=settings.group(STAGE),
        )

    async def prepare(self) -> None:
        """The read model's indexes and the key store's."""
        await through_outages(
            partial(asyncio.to_thread, ensure_indexes, self.db), "creating indexes"
        )
        await through_outages(
            partial(asyncio.to_thread, self.data_keys.prepare), "preparing the key store"
        )

    # --- one batch ------------------------------------------------------------------------

    async def apply_batch(self, records: Sequence[InputRecord]) -> None:
        """Read the records in order, project them in bulk — a forgetting record's keys
        destroyed after everything before it is projected, before it is read further — then
        dead-letter the poison, then store the progress (docs/architecture.md, "Replay")."""
        read_events: list[tuple[InputRecord, AnyEvent]] = []
        run: list[tuple[InputRecord, AnyEvent]] = []
        failed: list[Failed] = []
        done = 0
        while done < len(records):
            read = await self.read_up_to_forgetting(records[done:])
            for record, event in zip(records[done:], read, strict=False):
                if isinstance(event, Exception):  # poison (outages never get here)
                    failed.append((record, event))
                    continue
                if isinstance(event, SessionForgotten | UserForgotten | MemoriesForgotten):
                    failed += await self.project_run(run)
                    run = []
                    try:
                        await self.destroy_keys(record, event)
                    except Exception as exc:
                        failed.append((record, exc))
                        continue
                if event is not None:
                    run.append((record, event))
                    read_events.append((record, event))
            done += len(read)
        failed += await self.project_run(run)
        await self.dead_letter_all(failed)
        poison = {id(record) for record, _ in failed}
        for record, event in read_events:
            if id(record) not in poison:  # its writes are in, its progress is not
                decisions = getattr(event, "decisions", ())
                fault_point(
                    "projector.after_project", event.event_type, *(d.event_type for d in decisions)
                )
        await self.progress.store(highest_offsets(records))

    # --- reading --------------------------------------------------------------------------

    async def read_up_to_forgetting(self, records: Sequence[InputRecord]) -> list[Read]:
        read: list[Read] = []
        await through_outages(
            lambda: with_keys(lambda: self.read_into(read, records)),
            f"reading {records[0].position} and on",
        )
        return read

    def read_into(self, read: list[Read], records: Sequence[InputRecord]) -> None:
        """Read the records after those in `read`, in order, up to the first forgetting record
        (its keys die before anything after it is read); poison is kept as its error."""
        for record in records[len(read) :]:
            try:
                event = self.readable(record)
            except KeyNotCached:
                raise  # looked up, then read again from this record (`with_keys`)
            except Exception as exc:
                if is_outage(exc):
                    raise
                read.append(exc)
                continue
            read.append(event)
            if isinstance(event, SessionForgotten | UserForgotten | MemoriesForgotten):
                return

    def readable(self, record: InputRecord) -> AnyEvent | None:
        """The record's event, or None when it is not to be projected (with the reason logged);
        poison on the memories or dead-letter topics, which no other stage owns, raises."""
        try:
            if record.topic == self.topics.turns:
                return read_turns_record(record.key, record.value, self.ring)
            if record.topic == self.topics.snapshots:
                return read_snapshots_record(record.key, record.value, self.ring)
        except InvalidRecord as exc:
            log.info("not projected %s (refused upstream): %s", record.position, exc)
            return None
        except KeyDestroyed:
            log.info("not projected %s (its content is forgotten)", record.position)
            return None
        try:
            return decode(record.value or b"", opener(self.ring))
        except KeyDestroyed:
            log.info("not projected %s (its content is forgotten)", record.position)
            return None

    # --- writing --------------------------------------------------------------------------

    async def destroy_keys(self, record: InputRecord, event: KeyForgetting) -> None:
        # Keys first: the erasure projected next may complete the receipt, and a complete
        # receipt promises the log no longer opens.
        await through_outages(
            partial(asyncio.to_thread, destroy_forgotten_keys, self.data_keys, self.writes, event),
            f"destroying the keys {record.position} forgets",
        )

    async def project_run(self, run: Sequence[tuple[InputRecord, AnyEvent]]) -> list[Failed]:
        """Project `run` in bulk (`projections.batch`); the records it failed on, and why."""
        if not run:
            return []
        batch = [(event, record.partition) for record, event in run]
        metrics.PROJECTOR_BATCH.observe(len(batch))
        with metrics.timed(metrics.PROJECTOR_WRITE_SECONDS):
            outcome = await through_outages(
                partial(asyncio.to_thread, project_batch, self.db, batch),
                f"projecting {run[0][0].position} and {len(run) - 1} more",
            )
        return [
            (record, error) for (record, _), error in zip(run, outcome.errors, strict=True) if error
        ]

    async def dead_letter_all(self, failed: Sequence[Failed]) -> None:
        letters = []
        for record, error in failed:
            log.error("projecting %s failed: %r", record.position, error, exc_info=error)
            reason = f"projection failed: {error!r}"
            letters.append(
                (dead_letter_record(record, stage=STAGE, reason=reason, now=self.clock()), None)
            )
            metrics.DEAD_LETTERS.labels(STAGE, metrics.dead_letter_kind(reason)).inc()
        if letters:
            await through_outages(
                partial(asyncio.to_thread, project_batch, self.db, letters),
                f"dead-lettering {len(letters)} records",
            )


def create_projector_app(
    settings: StreamSettings,
    db: Database[dict[str, Any]],
    data_keys: DataKeys,
    clock: Clock = utc_now,
) -> faust.App:
    """The projector of `db`, opening sealed records and destroying forgotten keys with
    `data_keys` (`memstream.keystore`: the store on the same database, in production)."""
    app = faust_app(STAGE, settings)
    stage = ProjectorStage(app, settings, db, data_keys, clock)

    @app.task  # type: ignore[untyped-decorator]
    async def prepare_indexes() -> None:
        await stage.prepare()

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def forget_progress(sender: faust.App, revoked: Any, **_: Any) -> None:
        stage.progress.forget()

    @app.agent(stage.events, concurrency=1)
    async def project_events(stream: faust.StreamT[bytes]) -> None:
        await apply_batches(
            stream, stage.guard, stage.apply_batch, max_records=BATCH_RECORDS, within=BATCH_SECONDS
        )

    return app
