"""Setting poison records aside on the dead-letter topic, with the reason."""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime

import faust

from events.codec import encode
from events.dead_letters import InputDeadLettered
from handlers.dead_letters import dead_letter_id
from streams.metrics import DEAD_LETTERS, dead_letter_kind
from streams.records import InputRecord
from streams.settings import Clock

log = logging.getLogger(__name__)


def dead_letter_record(
    record: InputRecord, *, stage: str, reason: str, now: datetime
) -> InputDeadLettered:
    """The `InputDeadLettered` for `record`.

    Its id derives from the stage and the record's key and value, not from the record's position
    (positions repeat when the embedded log is restarted): the same poison re-read after a crash
    gives the same dead letter; a redriven record that fails again gives a new one
    (`handlers.dead_letters.dead_letter_id`). `now` (wall clock) only stamps when it was set aside.
    """
    raw = record.value or b""
    key = record.key.decode(errors="replace") if record.key is not None else None
    redrive = record.redrive
    return InputDeadLettered(
        event_id=dead_letter_id(stage, record.topic, record.key, record.value, redrive),
        occurred_at=now,
        stage=stage,
        reason=reason[:4_000],
        source_topic=record.topic,
        source_partition=record.partition,
        source_offset=record.offset,
        record_key=key,
        payload=raw.decode(errors="replace")[:64_000],
        dead_lettered_at=now,
        payload_bytes=len(raw),
        payload_sha256=hashlib.sha256(raw).hexdigest(),
        redrive_id=redrive.redrive_id if redrive else None,
        redrive_of=redrive.dead_letter_id if redrive else None,
    )


async def dead_letter(
    topic: faust.TopicT, record: InputRecord, *, stage: str, reason: str, clock: Clock
) -> None:
    """Publish the record's `InputDeadLettered` on the dead-letter topic and wait for the ack."""
    dead = dead_letter_record(record, stage=stage, reason=reason, now=clock())
    log.warning("dead-lettered %s: %s", record.position, reason)
    await (await topic.send(key=record.key, value=encode(dead), force=True))
    DEAD_LETTERS.labels(stage, dead_letter_kind(reason)).inc()
