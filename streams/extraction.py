"""An extraction stage: snapshots in, memory events out, one consumer group per memory type.

The agent only wires: skip snapshots this type already extracted (a per-user table of the last
extracted seq of each session), run the extractor with retries, embed, reconcile, send the memory
events (waiting for acks), then record progress. A `PartitionGuard` hands it each snapshot record
once and in order, reading records the consumer skipped back from the log. Invalid LLM output
after the retries is dead-lettered with the reason; an unavailable LLM or embedder is retried with
back-off and never dead-letters.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import faust
import orjson

from events.codec import EventDecodeError, decode, encode
from events.memories import MemoryAdded
from events.snapshots import SnapshotExtracted, SnapshotPromoted
from handlers.extraction.base import Extractor, extract
from handlers.ports import ChatModel, Embedder, ProviderUnavailable
from handlers.reconcile import additions, extraction_finished
from streams.app import faust_app, raw_table, raw_topic
from streams.dead_letters import dead_letter, or_dead_letter
from streams.progress import guard_partitions
from streams.records import InputRecord
from streams.settings import Clock, StreamSettings, utc_now

log = logging.getLogger(__name__)
MAX_BACKOFF_SECONDS = 30.0
T = TypeVar("T")


def create_extraction_app(
    settings: StreamSettings,
    extractor: Extractor,
    llm: ChatModel,
    embedder: Embedder,
    clock: Clock = utc_now,
) -> faust.App:
    stage = f"extract-{extractor.memory_type}"
    app = faust_app(stage, settings)
    snapshots = raw_topic(app, settings.topics.snapshots, settings)
    memories = raw_topic(app, settings.topics.memories, settings)
    dead_letters = raw_topic(app, settings.topics.dead_letters, settings)
    progress = raw_table(app, "extracted-seqs", settings)
    guard = guard_partitions(
        app,
        progress,
        bootstrap_servers=settings.bootstrap_servers,
        stage=stage,
        topics=[settings.topics.snapshots],
    )

    async def apply(record: InputRecord) -> None:
        try:
            snapshot = decode(record.value or b"")
            if not isinstance(snapshot, SnapshotPromoted):
                raise EventDecodeError(f"{snapshot.event_type} is not a snapshot")
        except EventDecodeError as exc:
            await dead_letter(dead_letters, record, stage=stage, reason=str(exc), clock=clock)
            return
        user_key = snapshot.key.encode()
        seen: dict[str, int] = orjson.loads(progress.get(user_key) or b"{}")
        if seen.get(snapshot.session_id, -1) >= snapshot.seq:
            log.info("snapshot %s already extracted (%s)", snapshot.event_id, stage)
            return
        outcome = await patiently(
            lambda: extract(extractor, snapshot, llm, attempts=settings.llm_attempts),
            snapshot.event_id,
        )
        added: list[MemoryAdded] = []
        if outcome.failure:
            await dead_letter(
                dead_letters, record, stage=stage, reason=outcome.failure, clock=clock
            )
        else:
            texts = [memory.text for memory in outcome.memories]
            vectors = (
                await patiently(lambda: asyncio.to_thread(embedder.embed, texts), snapshot.event_id)
                if texts
                else []
            )
            added = additions(
                snapshot, extractor.memory_type, outcome.memories, vectors, now=clock()
            )
        finished = extraction_finished(
            snapshot,
            extractor.memory_type,
            added,
            attempts=outcome.attempts,
            failure=outcome.failure,
            now=clock(),
        )
        outgoing: list[MemoryAdded | SnapshotExtracted] = [*added, finished]
        for memory_event in outgoing:
            key = memory_event.key.encode()
            await (await memories.send(key=key, value=encode(memory_event), force=True))
        log.info(
            "snapshot %s: %d %s memories", snapshot.event_id, len(added), extractor.memory_type
        )
        seen[snapshot.session_id] = snapshot.seq
        progress[user_key] = orjson.dumps(seen)

    @app.agent(snapshots, concurrency=1)
    async def extract_memories(stream: faust.StreamT[bytes]) -> None:
        apply_safely = or_dead_letter(apply, dead_letters, stage=stage, clock=clock)
        async for event in stream.events():
            await guard.apply_in_order(event, apply_safely)

    return app


async def patiently(call: Callable[[], Awaitable[T]], snapshot_id: str) -> T:
    """Await `call()`, retrying with back-off while a model provider is unavailable."""
    backoff = 1.0
    while True:
        try:
            return await call()
        except ProviderUnavailable as exc:
            log.warning("snapshot %s: %s; retrying in %.0fs", snapshot_id, exc, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
