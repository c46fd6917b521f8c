"""An extraction stage: snapshots in, memory events out, one consumer group per memory type.

The agent only wires: skip snapshots this type already extracted (a per-user table of the last
extracted seq of each session), run the extractor with retries, embed, reconcile, send the memory
events (waiting for acks), then record progress. Invalid LLM output after the retries is
dead-lettered with the reason; an unreachable LLM is retried with back-off and never dead-letters.
"""

from __future__ import annotations

import asyncio
import logging

import faust
import orjson

from events.codec import EventDecodeError, decode, encode
from events.snapshots import SnapshotPromoted
from handlers.extraction.base import ExtractionOutcome, Extractor, extract
from handlers.ports import ChatModel, Embedder, LLMUnavailable
from handlers.reconcile import additions
from streams.app import faust_app, raw_topic
from streams.dead_letters import dead_letter
from streams.settings import Clock, StreamSettings, utc_now

log = logging.getLogger(__name__)
MAX_BACKOFF_SECONDS = 30.0


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
    progress = app.Table(
        "extracted-seqs",
        default=None,
        partitions=settings.partitions,
        key_type=bytes,
        value_type=bytes,
    )

    @app.agent(snapshots, concurrency=1)
    async def extract_memories(stream: faust.StreamT[bytes]) -> None:
        async for event in stream.events():
            try:
                snapshot = decode(event.value)
                if not isinstance(snapshot, SnapshotPromoted):
                    raise EventDecodeError(f"{snapshot.event_type} is not a snapshot")
            except EventDecodeError as exc:
                await dead_letter(dead_letters, event, stage=stage, reason=str(exc), clock=clock)
                continue
            seen: dict[str, int] = orjson.loads(progress.get(event.key) or b"{}")
            if seen.get(snapshot.session_id, -1) >= snapshot.seq:
                log.info("snapshot %s already extracted (%s)", snapshot.event_id, stage)
                continue
            outcome = await _extract_patiently(extractor, snapshot, llm, settings.llm_attempts)
            if outcome.failure:
                await dead_letter(
                    dead_letters, event, stage=stage, reason=outcome.failure, clock=clock
                )
            else:
                texts = [memory.text for memory in outcome.memories]
                vectors = await asyncio.to_thread(embedder.embed, texts) if texts else []
                for memory_event in additions(
                    snapshot, extractor.memory_type, outcome.memories, vectors, now=clock()
                ):
                    sent = await memories.send(
                        key=memory_event.key.encode(), value=encode(memory_event), force=True
                    )
                    await sent
                log.info(
                    "snapshot %s: %d %s memories",
                    snapshot.event_id,
                    len(outcome.memories),
                    extractor.memory_type,
                )
            seen[snapshot.session_id] = snapshot.seq
            progress[event.key] = orjson.dumps(seen)

    return app


async def _extract_patiently(
    extractor: Extractor, snapshot: SnapshotPromoted, llm: ChatModel, attempts: int
) -> ExtractionOutcome:
    """Extract, waiting out LLM outages; any other failure becomes a dead-letter reason."""
    backoff = 1.0
    while True:
        try:
            return await extract(extractor, snapshot, llm, attempts=attempts)
        except LLMUnavailable as exc:
            log.warning(
                "LLM call failed for snapshot %s (%s); retrying in %.0fs",
                snapshot.event_id,
                exc,
                backoff,
            )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
        except Exception as exc:  # a bug or unexpected answer must not crash the worker
            log.exception("extraction of snapshot %s failed", snapshot.event_id)
            return ExtractionOutcome((), 0, failure=f"extraction failed: {exc!r}")
