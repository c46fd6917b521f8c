"""Creating the pipeline's topics with explicit partition counts (never broker auto-creation)."""

from __future__ import annotations

import asyncio
from contextlib import suppress

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from memstream.config import KafkaSettings


class TopicMismatch(RuntimeError):
    """An existing topic has a different partition count than the configuration."""


async def ensure_topics(kafka: KafkaSettings) -> dict[str, int]:
    """Create missing topics; check existing ones. Returns `{topic: partitions}`."""
    if not kafka.bootstrap_servers:
        raise ValueError("KAFKA_BOOTSTRAP_SERVERS is not set")
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    await admin.start()
    try:
        wanted = kafka.topics.all()
        existing = set(await admin.list_topics())
        missing = [name for name in wanted if name not in existing]
        if missing:
            with suppress(TopicAlreadyExistsError):  # another process created it meanwhile
                await admin.create_topics(
                    [NewTopic(name, kafka.partitions, kafka.replication_factor) for name in missing]
                )
        return await _check_partitions(admin, wanted, kafka.partitions)
    finally:
        await admin.close()


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
