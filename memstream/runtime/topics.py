"""Creating the pipeline's topics with explicit partition counts (never broker auto-creation).

The partition count is fixed when the topics are made: a stage's state is partitioned like its
input, so adding partitions later would move users to partitions whose state is elsewhere. So
the count the topics have is the one every worker must use: when `kafka.partitions` was not set
explicitly (file or environment) and the topics already exist with another count — made by an
earlier release, whose default was 4 — that count is adopted (`topic_partitions`), with a note.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from memstream.config import KafkaSettings
from streams.kafka_security import start_client

log = logging.getLogger(__name__)


class TopicMismatch(RuntimeError):
    """An existing topic has a different partition count than the configuration."""


async def ensure_topics(kafka: KafkaSettings) -> dict[str, int]:
    """Create missing topics; check existing ones. Returns `{topic: partitions}`."""
    if not kafka.bootstrap_servers:
        raise ValueError("KAFKA_BOOTSTRAP_SERVERS is not set")
    admin = AIOKafkaAdminClient(**kafka.client_options())
    await start_client(admin, kafka.bootstrap_servers, kafka.security)
    try:
        wanted = kafka.topics.all()
        existing = [name for name in wanted if name in set(await admin.list_topics())]
        partitions = kafka.partitions
        if existing and "partitions" not in kafka.model_fields_set:
            counts = set((await _partition_counts(admin, tuple(existing))).values())
            if len(counts) == 1 and (found := counts.pop()) != partitions:
                log.warning(
                    "the topics exist with %d partitions; using that count (kafka.partitions "
                    "defaults to %d for new topics)",
                    found,
                    partitions,
                )
                partitions = found
        missing = [name for name in wanted if name not in existing]
        if missing:
            with suppress(TopicAlreadyExistsError):  # another process created it meanwhile
                await admin.create_topics(
                    [NewTopic(name, partitions, kafka.replication_factor) for name in missing]
                )
        return await _check_partitions(admin, wanted, partitions)
    finally:
        await admin.close()


def topic_partitions(kafka: KafkaSettings, counts: dict[str, int]) -> int:
    """The partition count the workers must use, from what `ensure_topics` found."""
    found = set(counts.values())
    return found.pop() if len(found) == 1 else kafka.partitions


async def _partition_counts(admin: AIOKafkaAdminClient, topics: tuple[str, ...]) -> dict[str, int]:
    return {d["topic"]: len(d["partitions"]) for d in await admin.describe_topics(list(topics))}


async def _check_partitions(
    admin: AIOKafkaAdminClient, topics: tuple[str, ...], partitions: int
) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _ in range(60):  # a topic just created may show no partitions until metadata settles
        counts = {
            d["topic"]: len(d["partitions"]) for d in await admin.describe_topics(list(topics))
        }
        if all(counts.get(name) for name in topics):
            break
        await asyncio.sleep(0.5)
    wrong = {name: count for name, count in counts.items() if count != partitions}
    if wrong:
        raise TopicMismatch(
            f"topics exist with other partition counts than kafka.partitions={partitions}: {wrong}"
            " (stream tables need matching counts; use a new topic_prefix or recreate them)"
        )
    return counts
