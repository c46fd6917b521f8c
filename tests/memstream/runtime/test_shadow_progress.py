"""How far a shadow's stages are, as `memstream reextract` judges it: by the progress each stage
keeps, never by its group's committed offsets (docs/architecture.md, "Re-extraction")."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndMetadata
from faust.types import TP

from memstream.config import KafkaSettings
from memstream.runtime.shadow import applied, reached
from streams.table_keys import progress_key
from tests.support.pipeline import produce_raw

pytestmark = pytest.mark.integration

PARTITIONS = 2


async def commit(kafka: KafkaSettings, group: str, topic: str, offsets: Mapping[int, int]) -> None:
    consumer = AIOKafkaConsumer(**kafka.client_options(), group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in offsets])
        await consumer.commit(
            {TopicPartition(topic, p): OffsetAndMetadata(o, "") for p, o in offsets.items()}
        )
    finally:
        await consumer.stop()


async def create(kafka: KafkaSettings, *topics: str) -> None:
    admin = AIOKafkaAdminClient(**kafka.client_options())
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(name, num_partitions=PARTITIONS, replication_factor=1) for name in topics]
        )
    finally:
        await admin.close()


def test_a_stage_is_as_far_as_its_progress_even_when_its_group_committed_further(
    broker: Any,
) -> None:
    run = uuid.uuid4().hex[:10]
    kafka = KafkaSettings(bootstrap_servers=broker.bootstrap_servers, partitions=PARTITIONS)
    snapshots, group = f"t{run}.snapshots", f"g{run}-extract-semantic"
    changelog = f"{group}-progress-changelog"
    targets = {0: 10, 1: 4}

    async def scenario() -> tuple[int, int, int]:
        before = await applied(kafka, changelog, snapshots, targets)  # no changelog yet
        await create(kafka, snapshots, changelog)
        progress = [
            (progress_key(TP(snapshots, 0)), b"3", 0),
            (progress_key(TP(snapshots, 0)), b"6", 0),  # the latest value counts
            (progress_key(TP(snapshots, 1)), b"3", 1),
        ]
        await produce_raw(kafka.bootstrap_servers, changelog, progress)
        records = [(None, b"snapshot", p) for p, count in targets.items() for _ in range(count)]
        await produce_raw(kafka.bootstrap_servers, snapshots, records)
        # Faust committed past records the stage never applied (streams.progress)
        await commit(kafka, group, snapshots, targets)
        return (
            before,
            await applied(kafka, changelog, snapshots, targets),
            await reached(kafka, group, snapshots, targets),
        )

    before, done, committed = asyncio.run(scenario())

    assert before == 0
    assert done == 7 + 4  # offsets 0-6 of partition 0, all four of partition 1
    assert committed == 14  # what the commits alone would have said: finished
