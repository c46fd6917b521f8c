"""The projector stage: every event topic into the MongoDB read model (SPEC §5).

Undecodable records are not projected (the window stage dead-letters bad turns; the projector only
logs them). Database outages are waited out, so no event is ever skipped; an event the read model
refuses for another reason is kept in `dead_letters` with the reason.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust
from pymongo.database import Database
from pymongo.errors import ConnectionFailure, OperationFailure

from events.codec import AnyEvent, EventDecodeError, decode
from projections import ensure_indexes, project
from streams.app import faust_app, raw_table
from streams.dead_letters import dead_letter_record
from streams.progress import guard_partitions
from streams.records import InputRecord
from streams.settings import Clock, StreamSettings, utc_now

log = logging.getLogger(__name__)
STAGE = "projector"
MAX_BACKOFF_SECONDS = 30.0
MAX_TRANSIENT_FAILURES = 5


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
    guard = guard_partitions(
        app,
        applied_offsets,
        bootstrap_servers=settings.bootstrap_servers,
        stage=STAGE,
        topics=[topics.turns, topics.snapshots, topics.memories, topics.dead_letters],
    )

    @app.task  # type: ignore[untyped-decorator]
    async def prepare_indexes() -> None:
        await asyncio.to_thread(ensure_indexes, db)

    @app.agent(events, concurrency=1)
    async def project_events(stream: faust.StreamT[bytes]) -> None:
        async def apply(record: InputRecord) -> None:
            await _project_record(db, record, clock)

        async for event in stream.events():
            await guard.apply_in_order(event, apply)

    return app


async def _project_record(db: Database[dict[str, Any]], record: InputRecord, clock: Clock) -> None:
    """Project one record; an undecodable one is only logged, a refused one is dead-lettered."""
    try:
        decoded = decode(record.value or b"")
    except EventDecodeError as exc:
        log.warning("not projected %s: %s", record.position, exc)
        return
    log.debug("projecting %s %s", decoded.event_type, decoded.event_id)
    try:
        await _project_patiently(db, decoded)
    except Exception as exc:  # not an outage: keep the event visible, go on
        log.exception("projecting %s failed", decoded.event_id)
        reason = f"projection failed: {exc!r}"
        dead = dead_letter_record(record, stage=STAGE, reason=reason, now=clock())
        await asyncio.to_thread(project, db, dead)


async def _project_patiently(db: Database[dict[str, Any]], event: AnyEvent) -> None:
    """Project one event, waiting out database outages with back-off.

    Connection failures are retried for as long as they last; an operation the server failed
    for a transient reason is retried a few times; anything else is raised to the caller.
    """
    backoff = 0.5
    transient_failures = 0
    while True:
        try:
            await asyncio.to_thread(project, db, event)
            return
        except ConnectionFailure as exc:
            log.warning("projecting %s: %s; retrying in %.1fs", event.event_id, exc, backoff)
        except OperationFailure as exc:
            transient_failures += 1
            if not _transient(exc) or transient_failures > MAX_TRANSIENT_FAILURES:
                raise
            log.warning("projecting %s: %s; retrying in %.1fs", event.event_id, exc, backoff)
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)


def _transient(exc: OperationFailure) -> bool:
    """A server-side failure worth another try (internal errors, retryable-write labels)."""
    retryable = exc.has_error_label("RetryableWriteError")
    return retryable or exc.has_error_label("TransientTransactionError") or exc.code in (1, 11600)
