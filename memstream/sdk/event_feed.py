"""A user's memory events straight from the log, for consumers that replay history.

The memories topic is keyed by user, so one partition holds all of a user's records; the feed
reads that partition with a consumer of its own (no group, nothing committed), keeps the user's
records, and yields the memory events of each result record — the first record per snapshot (or
save) and type only, as the projector does. It starts at the beginning, at an offset, or at a
time the records were appended at or after (`offsets_for_times`), and with `follow` waits for
new records after reaching the end.

Forgotten memories: the feed skips every event of a memory in `erased`, the ids the user's
erasure receipts list (`ReadModel.erased_memory_ids`, read once when the feed starts). Logical
forgetting erases the read models but not the log: the memories topic still holds those events.
With content sealed (docs/architecture.md, "Crypto-shredding") their keys are destroyed and they
no longer open; the filter also covers events written in plaintext. A memory forgotten while a
feed follows was sent to it before it was forgotten; its id never comes back (a memory id
derives from the snapshot or save that made it), so nothing after the erasure needs the filter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from functools import partial

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from events.codec import EventDecodeError, decode
from events.consolidations import MemoriesConsolidated
from events.memories import MemoryAdded, MemoryEvent, MemoryReinforced, MemoryUpdated
from events.rollbacks import MemoryRolledBack
from events.saves import MemorySaved
from events.snapshots import SnapshotExtracted
from handlers.key_ring import StoreKeyRing, with_keys
from handlers.sealed_events import NoKeyStore, opener
from handlers.sealing import KeyDestroyed, SealBroken
from memstream.config import KafkaSettings

QUIET_FETCH_MS = 500


def user_partition(user_id: str, partitions: int) -> int:
    """The partition a record keyed by `user_id` goes to (Kafka's default murmur2 partitioner)."""
    choose = DefaultPartitioner()
    ids = list(range(partitions))
    return int(choose(user_id.encode(), ids, ids))


async def memory_events(
    kafka: KafkaSettings,
    user_id: str,
    *,
    since: int | datetime | None = None,
    follow: bool = False,
    erased: frozenset[str] = frozenset(),
    keys: StoreKeyRing | None = None,
) -> AsyncIterator[MemoryEvent]:
    """The user's memory events in log order, but those of the `erased` memories (see the
    module doc); sealed content opened with `keys` (events whose keys were destroyed are
    forgotten and skipped; without keys, sealed events are skipped)."""
    if not kafka.bootstrap_servers:
        raise ValueError("KAFKA_BOOTSTRAP_SERVERS is not set (is `memstream up` running?)")
    tp = TopicPartition(kafka.topics.memories, user_partition(user_id, kafka.partitions))
    consumer = AIOKafkaConsumer(
        **kafka.client_options(),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        await _seek(consumer, tp, since)
        end = (await consumer.end_offsets([tp]))[tp]
        seen: set[str] = set()
        key = user_id.encode()
        earliest = int(since.timestamp() * 1000) if isinstance(since, datetime) else None
        while True:
            batches = await consumer.getmany(tp, timeout_ms=QUIET_FETCH_MS)
            records = batches.get(tp, [])
            for record in records:
                if record.key != key or record.value is None:
                    continue
                if earliest is not None and record.timestamp < earliest:
                    continue
                read = partial(_memory_events_of, record.value, seen, keys)
                for event in await with_keys(read):
                    if event.memory_id not in erased:
                        yield event
            if not follow and not records and await consumer.position(tp) >= end:
                return
    finally:
        await consumer.stop()


async def _seek(
    consumer: AIOKafkaConsumer, tp: TopicPartition, since: int | datetime | None
) -> None:
    if since is None:
        await consumer.seek_to_beginning(tp)
    elif isinstance(since, datetime):
        found = await consumer.offsets_for_times({tp: int(since.timestamp() * 1000)})
        at = found.get(tp)
        if at is None or at.timestamp < 0:  # Tansu answers a time past the end with (0, -1)
            await consumer.seek_to_end(tp)
        else:
            consumer.seek(tp, at.offset)
    else:
        consumer.seek(tp, since)


def _memory_events_of(value: bytes, seen: set[str], keys: StoreKeyRing | None) -> list[MemoryEvent]:
    try:
        event = decode(value, opener(keys))
    except (EventDecodeError, SealBroken, KeyDestroyed, NoKeyStore):
        return []  # not an event, or a forgotten one; without keys, sealed content is skipped
    if isinstance(event, SnapshotExtracted | MemorySaved | MemoryRolledBack | MemoriesConsolidated):
        if event.event_id in seen:
            return []  # a later result for the same snapshot (or save) and type: the first wins
        seen.add(event.event_id)
        return list(event.decisions)
    if isinstance(event, MemoryAdded | MemoryUpdated | MemoryReinforced):
        return [event]
    return []
