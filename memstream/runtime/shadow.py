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

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from faust.types import TP
from pymongo.database import Database

from memstream.config import KafkaSettings, Settings
from projections.progress import topic_offsets
from streams.log_reader import KafkaLogReader
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
    stored = await _latest_values(kafka, changelog)
    last = {
        partition: int(value)
        for partition in targets
        if (value := stored.get(progress_key(TP(topic, partition))))
    }
    return _records_before(last, targets)


def projected(db: Database[dict[str, Any]], topic: str, targets: Mapping[int, int]) -> int:
    """How many of the records before `targets` (per partition of `topic`) the projector has
    applied to the read model `db`, by the progress it keeps there."""
    return _records_before(topic_offsets(db, topic), targets)


def _records_before(last_applied: Mapping[int, int], targets: Mapping[int, int]) -> int:
    """Of the records before each partition's target, how many lie at or below its last
    applied offset (none where nothing was applied)."""
    return sum(
        min(last_applied[partition] + 1, target) if partition in last_applied else 0
        for partition, target in targets.items()
    )


async def _latest_values(kafka: KafkaSettings, topic: str) -> dict[bytes, bytes | None]:
    """The latest value of every key of a table changelog, partitioned like the pipeline's
    topics, read from its start to its end now; empty when it does not exist yet."""
    if not kafka.bootstrap_servers:
        raise ValueError("KAFKA_BOOTSTRAP_SERVERS is not set")
    admin = AIOKafkaAdminClient(**kafka.client_options())
    await admin.start()
    try:
        exists = topic in set(await admin.list_topics())
    finally:
        await admin.close()
    if not exists:
        return {}
    reader = KafkaLogReader(kafka.bootstrap_servers, security=kafka.security)
    tails = await asyncio.gather(
        *(reader.read_tail(TP(topic, partition), 0) for partition in range(kafka.partitions))
    )
    return {record.key: record.value for tail in tails for record in tail if record.key}


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
