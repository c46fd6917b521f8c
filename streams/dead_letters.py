"""Setting bad records aside on the dead-letter topic, with the reason."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

import faust

from events.codec import encode
from events.dead_letters import InputDeadLettered
from events.memories import derived_id
from streams.records import InputRecord
from streams.settings import Clock

log = logging.getLogger(__name__)


def dead_letter_record(
    record: InputRecord, *, stage: str, reason: str, now: datetime
) -> InputDeadLettered:
    """The `InputDeadLettered` for `record` (its id derives from the record's position)."""
    raw = record.value or b""
    key = record.key.decode(errors="replace") if record.key is not None else None
    return InputDeadLettered(
        event_id=derived_id("dead-letter", stage, record.topic, record.partition, record.offset),
        occurred_at=now,
        stage=stage,
        reason=reason[:4_000],
        source_topic=record.topic,
        source_partition=record.partition,
        source_offset=record.offset,
        record_key=key,
        payload=raw.decode(errors="replace")[:64_000],
        dead_lettered_at=now,
    )


async def dead_letter(
    topic: faust.TopicT, record: InputRecord, *, stage: str, reason: str, clock: Clock
) -> None:
    """Publish the record's `InputDeadLettered` on the dead-letter topic and wait for the ack."""
    dead = dead_letter_record(record, stage=stage, reason=reason, now=clock())
    log.warning("dead-lettered %s: %s", record.position, reason)
    await (await topic.send(key=record.key, value=encode(dead), force=True))


def or_dead_letter(
    apply: Callable[[InputRecord], Awaitable[None]],
    topic: faust.TopicT,
    *,
    stage: str,
    clock: Clock,
) -> Callable[[InputRecord], Awaitable[None]]:
    """`apply`, except that a record it fails on is dead-lettered: a bug never stops a stream."""

    async def applied_or_dead_lettered(record: InputRecord) -> None:
        try:
            await apply(record)
        except Exception as exc:
            log.exception("%s failed on %s", stage, record.position)
            reason = f"{stage} failed: {exc!r}"
            await dead_letter(topic, record, stage=stage, reason=reason, clock=clock)

    return applied_or_dead_lettered
