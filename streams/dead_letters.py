"""Setting bad records aside on the dead-letter topic, with the reason."""

from __future__ import annotations

import logging
from datetime import datetime

import faust
from faust.types import EventT

from events.codec import encode
from events.dead_letters import InputDeadLettered
from events.memories import derived_id
from streams.settings import Clock

log = logging.getLogger(__name__)


def dead_letter_record(
    event: EventT[bytes], *, stage: str, reason: str, now: datetime
) -> InputDeadLettered:
    """The `InputDeadLettered` for the record behind `event` (its id derives from the position)."""
    message = event.message
    raw = event.value if isinstance(event.value, bytes) else repr(event.value).encode()
    key = message.key.decode(errors="replace") if isinstance(message.key, bytes) else None
    return InputDeadLettered(
        event_id=derived_id("dead-letter", stage, message.topic, message.partition, message.offset),
        occurred_at=now,
        stage=stage,
        reason=reason[:4_000],
        source_topic=message.topic,
        source_partition=message.partition,
        source_offset=message.offset,
        record_key=key,
        payload=raw.decode(errors="replace")[:64_000],
        dead_lettered_at=now,
    )


async def dead_letter(
    topic: faust.TopicT, event: EventT[bytes], *, stage: str, reason: str, clock: Clock
) -> None:
    """Publish the record's `InputDeadLettered` on the dead-letter topic and wait for the ack."""
    message = event.message
    record = dead_letter_record(event, stage=stage, reason=reason, now=clock())
    log.warning(
        "dead-lettered %s[%s]@%s: %s", message.topic, message.partition, message.offset, reason
    )
    await (await topic.send(key=message.key, value=encode(record), force=True))
