"""The projector stage: every event topic into the MongoDB read model (SPEC §5).

Undecodable records are not projected (the window stage dead-letters bad turns; the projector only
logs them). Database outages are waited out, so no event is ever skipped.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust
from pymongo.database import Database
from pymongo.errors import PyMongoError

from events.codec import EventDecodeError, decode
from projections import ensure_indexes, project
from streams.app import faust_app
from streams.settings import StreamSettings

log = logging.getLogger(__name__)
STAGE = "projector"
MAX_BACKOFF_SECONDS = 30.0


def create_projector_app(settings: StreamSettings, db: Database[dict[str, Any]]) -> faust.App:
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

    @app.task  # type: ignore[untyped-decorator]
    async def prepare_indexes() -> None:
        await asyncio.to_thread(ensure_indexes, db)

    @app.agent(events, concurrency=1)
    async def project_events(stream: faust.StreamT[bytes]) -> None:
        async for event in stream.events():
            try:
                decoded = decode(event.value)
            except EventDecodeError as exc:
                message = event.message
                log.warning(
                    "not projected %s[%s]@%s: %s",
                    message.topic,
                    message.partition,
                    message.offset,
                    exc,
                )
                continue
            backoff = 0.5
            while True:
                try:
                    await asyncio.to_thread(project, db, decoded)
                    break
                except PyMongoError as exc:
                    log.warning(
                        "projecting %s failed (%s); retrying in %.1fs",
                        decoded.event_id,
                        exc,
                        backoff,
                    )
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    return app
