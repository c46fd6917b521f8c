"""The projector stage: every event topic into the MongoDB read model (docs/architecture.md).

Each record is read with the same validation as the stage that owns its topic
(`handlers.inputs`): a turn the window dead-lettered, or a snapshot an extractor refused, is not
projected either. Database outages are waited out (`streams.retrying`), so no event is ever
skipped; a record whose content key was destroyed is forgotten and not projected; an event the
read model refuses for another reason — an id that already names other
content, a memories-topic record that is not an event — is kept in `dead_letters` with the
reason.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

import faust
from pymongo.database import Database

from events.codec import AnyEvent, decode
from events.forgetting import MemoriesForgotten, SessionForgotten, UserForgotten
from handlers.inputs import InvalidRecord, read_snapshots_record, read_turns_record
from handlers.sealed_events import opener
from handlers.sealing import KeyDestroyed
from projections import LiveWrites, ensure_indexes, project
from projections.data_keys import DataKeyStore, StoreKeyRing, with_keys
from projections.key_erasure import destroy_forgotten_keys
from streams.app import faust_app, raw_table
from streams.dead_letters import dead_letter_record
from streams.faults import fault_point
from streams.progress import guard_partitions
from streams.records import InputRecord
from streams.retrying import through_outages
from streams.settings import Clock, StreamSettings, utc_now

log = logging.getLogger(__name__)
STAGE = "projector"


def create_projector_app(
    settings: StreamSettings, db: Database[dict[str, Any]], clock: Clock = utc_now
) -> faust.App:
    app = faust_app(STAGE, settings)
    topics = settings.topics
    events = app.topic(
        topics.turns,
        topics.snapshots,
        topics.memories,
        topics.dead_letters,
        key_type=bytes,
        value_type=bytes,
    )
    applied_offsets = raw_table(app, "applied-offsets", settings)
    key_store = DataKeyStore(db, clock=clock)
    ring = StoreKeyRing(key_store)
    writes = LiveWrites(db)
    guard = guard_partitions(
        app,
        applied_offsets,
        bootstrap_servers=settings.bootstrap_servers,
        stage=STAGE,
        topics=[topics.turns, topics.snapshots, topics.memories, topics.dead_letters],
        group=settings.group(STAGE),
    )

    @app.task  # type: ignore[untyped-decorator]
    async def prepare_indexes() -> None:
        await through_outages(partial(asyncio.to_thread, ensure_indexes, db), "creating indexes")
        await through_outages(
            partial(asyncio.to_thread, key_store.ensure_indexes), "creating key indexes"
        )

    def readable(record: InputRecord) -> AnyEvent | None:
        """The record's event, or None when it is not to be projected (with the reason logged);
        poison on the memories or dead-letter topics, which no other stage owns, raises."""
        try:
            if record.topic == topics.turns:
                return read_turns_record(record.key, record.value, ring)
            if record.topic == topics.snapshots:
                return read_snapshots_record(record.key, record.value, ring)
        except InvalidRecord as exc:
            log.info("not projected %s (refused upstream): %s", record.position, exc)
            return None
        except KeyDestroyed:
            log.info("not projected %s (its content is forgotten)", record.position)
            return None
        try:
            return decode(record.value or b"", opener(ring))
        except KeyDestroyed:
            log.info("not projected %s (its content is forgotten)", record.position)
            return None

    async def apply(record: InputRecord) -> None:
        try:
            event = await through_outages(
                lambda: with_keys(lambda: readable(record)), f"reading {record.position}"
            )
            if event is None:
                return
            if isinstance(event, SessionForgotten | UserForgotten | MemoriesForgotten):
                # Keys first: the erasure step projected next may complete the receipt, and a
                # complete receipt promises the log no longer opens.
                await through_outages(
                    partial(asyncio.to_thread, destroy_forgotten_keys, key_store, writes, event),
                    f"destroying the keys {record.position} forgets",
                )
            await through_outages(
                partial(asyncio.to_thread, project, db, event, partition=record.partition),
                f"projecting {record.position}",
            )
            decisions = getattr(event, "decisions", ())
            fault_point(
                "projector.after_project", event.event_type, *(d.event_type for d in decisions)
            )
        except Exception as exc:  # poison (outages never get here): keep it visible, go on
            log.exception("projecting %s failed", record.position)
            dead = dead_letter_record(
                record, stage=STAGE, reason=f"projection failed: {exc!r}", now=clock()
            )
            await through_outages(
                partial(asyncio.to_thread, project, db, dead), f"dead-lettering {record.position}"
            )

    @app.agent(events, concurrency=1)
    async def project_events(stream: faust.StreamT[bytes]) -> None:
        async for event in stream.events():
            await guard.apply_in_order(event, apply)

    return app
