"""A shadow extractor: another named extractor run over the live log into a read model of its own
(docs/architecture.md, "Re-extraction").

A shadow named NAME is the live deployment seen through a few settings
(`memstream.promotion.lineage.shadow_environment`):

* its memory types' stages and its projector join consumer groups of their own
  (`<group prefix>shadow.NAME.…`: a name has no dot, so no shadow's prefix begins another's),
  so they read the live snapshots topic from its start without moving the live stages'
  offsets;
* they write their own results topics (`<topic prefix>shadow.NAME.memories`, `….dead-letters`)
  and their own read-model database (NAME): the live read model is never written;
* they keep the live data keys (`mongodb.keys_database`): one log, one key store, so sealed
  snapshots open as they do live, and what was forgotten (its keys destroyed) stays forgotten;
* the stages decide with the chosen extractor (`extractor`).

The shadow's projector reads the live turns and snapshots topics and its own results, so the
shadow is a whole read model, built by the same code, ids and ordering rules as the live one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from faust.types import TP
from pymongo.database import Database

from memstream.config import KafkaSettings, Settings
from projections.progress import topic_offsets
from streams.table_keys import progress_key


def shadow_stages(shadow: Settings) -> list[str]:
    """The shadow's workers: the extraction stage of each type its extractor enables, and its
    projector (no window: the live window promotes the snapshots both read)."""
    return [*(f"extract:{kind}" for kind in shadow.memory.extraction.enabled), "projector"]


async def end_offsets(kafka: KafkaSettings, topic: str) -> dict[int, int]:
    """Each partition's end offset of `topic` now."""
    consumer = AIOKafkaConsumer(**kafka.client_options(), enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(kafka.partitions)]
        ends = await consumer.end_offsets(partitions)
        return {tp.partition: int(offset) for tp, offset in ends.items()}
    finally:
        await consumer.stop()


async def applied(
    kafka: KafkaSettings, changelog: str, topic: str, targets: Mapping[int, int]
) -> int:
    """How many of the records before `targets` (per partition of `topic`) a stage has applied,
    by the progress it keeps in its own table, read from the table's `changelog` topic. Unlike
    its group's committed offsets, which Faust may move past records it never handed to the
    stage, this progress is never ahead of what the stage did (docs/architecture.md, "Stages",
    the partition guard)."""
    last = await _latest_values(kafka, changelog)
    done = 0
    for partition, target in targets.items():
        stored = last.get(progress_key(TP(topic, partition)))
        done += min(int(stored) + 1, target) if stored else 0
    return done


def projected(db: Database[dict[str, Any]], topic: str, targets: Mapping[int, int]) -> int:
    """How many of the records before `targets` (per partition of `topic`) the projector has
    applied to the read model `db`, by the progress it keeps there."""
    last = topic_offsets(db, topic)
    return sum(
        min(last[partition] + 1, target) if partition in last else 0
        for partition, target in targets.items()
    )


QUIET_FETCHES = 20
"""Empty fetches short of the end offsets after which a changelog is taken as read (about ten
seconds: a broker may overstate an end)."""


async def _latest_values(kafka: KafkaSettings, topic: str) -> dict[bytes, bytes | None]:
    """The latest value of every key of a (compacted) table changelog, partitioned like the
    pipeline's topics, read from its start to its end now; empty when it does not exist yet."""
    consumer = AIOKafkaConsumer(
        **kafka.client_options(), enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        if topic not in await consumer.topics():
            return {}
        tps = [TopicPartition(topic, p) for p in range(kafka.partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        await consumer.seek_to_beginning(*tps)
        latest: dict[bytes, bytes | None] = {}
        quiet = 0
        while quiet < QUIET_FETCHES:
            batch = await consumer.getmany(*tps, timeout_ms=500)
            for records in batch.values():
                for record in records:
                    if record.key is not None:
                        latest[record.key] = record.value
            if batch:
                quiet = 0
            elif all([await consumer.position(tp) >= ends[tp] for tp in tps]):
                break  # read until quiet: Tansu's end offsets can be short after batches
            else:
                quiet += 1
        return latest
    finally:
        await consumer.stop()


async def reached(kafka: KafkaSettings, group: str, topic: str, targets: Mapping[int, int]) -> int:
    """How many of the records before `targets` (per partition) `group` has committed past."""
    consumer = AIOKafkaConsumer(**kafka.client_options(), group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        done = 0
        for partition, target in targets.items():
            committed = await consumer.committed(TopicPartition(topic, partition))
            done += min(committed or 0, target)
        return done
    finally:
        await consumer.stop()


async def shadow_topics(shadow: KafkaSettings, group_prefix: str) -> list[str]:
    """The topics a shadow made: its results topics and its workers' table changelogs (Faust
    names them after the app, whose id is the consumer group: `<group prefix>…`)."""
    admin = AIOKafkaAdminClient(**shadow.client_options())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
    finally:
        await admin.close()
    topics = shadow.topics
    own = {topics.memories, topics.dead_letters}
    return sorted(name for name in existing if name in own or name.startswith(group_prefix))


async def has_progress(kafka: KafkaSettings, group: str, topic: str) -> bool:
    """Whether `group` has committed an offset past the start of any partition of `topic`."""
    return await reached(kafka, group, topic, dict.fromkeys(range(kafka.partitions), 1)) > 0


async def delete_topics(shadow: KafkaSettings, names: Sequence[str]) -> None:
    """Delete the shadow's topics (their records are the shadow's results, nothing else)."""
    if not names:
        return
    admin = AIOKafkaAdminClient(**shadow.client_options())
    await admin.start()
    try:
        await admin.delete_topics(list(names))
    finally:
        await admin.close()


SHADOW_MARK = "shadow"
"""The collection (one document) that marks a database as a shadow: `memstream discard` drops
only a database that holds it."""


def mark_shadow(live: Settings, name: str, extractor: str, now: datetime) -> None:
    """Write the shadow's mark in its database (once: a run that resumes keeps the first)."""
    from pymongo import MongoClient

    client: MongoClient[dict[str, Any]] = MongoClient(live.mongodb.uri, tz_aware=True)
    try:
        client[name][SHADOW_MARK].update_one(
            {"_id": SHADOW_MARK},
            {
                "$setOnInsert": {
                    "extractor": extractor,
                    "live_database": live.mongodb.database,
                    "created_at": now,
                }
            },
            upsert=True,
        )
    finally:
        client.close()


def shadow_extractor(live: Settings, name: str) -> str | None:
    """The extractor the shadow `name` was made with (its mark), or None when `name` is not a
    shadow."""
    from pymongo import MongoClient

    client: MongoClient[dict[str, Any]] = MongoClient(live.mongodb.uri, tz_aware=True)
    try:
        mark = client[name][SHADOW_MARK].find_one({"_id": SHADOW_MARK})
    finally:
        client.close()
    return None if mark is None else str(mark["extractor"])
