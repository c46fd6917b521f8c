"""Looking ahead in a snapshot's partition for a forget of its session (docs/architecture.md,
"Forgetting").

A forget request written while a snapshot is being extracted must keep that snapshot's memories
from ever appearing. So before asking the LLM about a snapshot, and again before writing the
result, a memory type's stage reads up to `FORGET_LOOKAHEAD` later records of the snapshot's
partition: a `SessionsForgotten` naming its session there means the snapshot gets a result
without decisions. Beyond the look ahead the memories appear until the forget is applied, which
erases them. (A crash that makes a stage apply a snapshot and its session's forget again is
covered otherwise: `handlers.forgetting.forget_again`.)
"""

from __future__ import annotations

from collections.abc import Sequence

from faust.types import TP

from events.snapshots import SnapshotPromoted
from handlers.forgetting import forget_ahead
from handlers.inputs import InvalidRecord, SnapshotsTopicEvent, read_snapshots_record
from handlers.sealed_events import NoKeyStore
from handlers.sealing import KeyDestroyed
from streams.log_reader import KafkaLogReader
from streams.records import InputRecord

FORGET_LOOKAHEAD = 200
"""How many later records of its partition a stage reads for a forget of a snapshot's session."""


async def forgotten_ahead(
    reader: KafkaLogReader, record: InputRecord, snapshot: SnapshotPromoted
) -> str | None:
    """The request id of a forget of the snapshot's session already written after it, if any."""
    tp = TP(record.topic, record.partition)
    later = await reader.read_ahead(tp, record.offset + 1, FORGET_LOOKAHEAD)
    return forget_ahead(snapshot, readable_events(later))


def readable_events(records: Sequence[InputRecord]) -> list[SnapshotsTopicEvent]:
    """The events of snapshots-topic `records`, poison left out (its stage dead-letters it)."""
    events: list[SnapshotsTopicEvent] = []
    for record in records:
        try:  # without keys: a look ahead is for forget requests, which are never sealed
            events.append(read_snapshots_record(record.key, record.value))
        except (InvalidRecord, NoKeyStore, KeyDestroyed):
            continue
    return events
