"""The serving topic: every `ReadModelSwitched`, in order (docs/architecture.md, "Promotion").

`switches` reads them all (one record per switch: a topic that grows with the operators'
decisions, never with traffic); `record_switch` writes one and waits for the broker's
acknowledgement; `synced` folds the topic and stores the result in the deployment's database, so
a switch written by a command that died before it stored the pointer is stored by the next fold
(the next `promote`, a live worker's start).
"""

from __future__ import annotations

import logging
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from events.codec import EventDecodeError, decode, encode
from events.serving import ReadModelSwitched
from handlers.serving import Served, fold
from memstream.config import KafkaSettings, Settings
from memstream.promotion.lineage import deployment_database
from memstream.promotion.pointer import write_served

log = logging.getLogger(__name__)

POLL_MS = 200


async def switches(kafka: KafkaSettings) -> list[ReadModelSwitched]:
    """Every switch on the serving topic, in log order (none when the topic does not exist)."""
    topic = kafka.topics.serving
    partitions = await _partitions(kafka, topic)
    if not partitions:
        return []
    consumer = AIOKafkaConsumer(**kafka.client_options(), enable_auto_commit=False)
    await consumer.start()
    try:
        assigned = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        ends = await consumer.end_offsets(assigned)
        found: list[ReadModelSwitched | None] = []
        while [tp for tp in assigned if await consumer.position(tp) < ends[tp]]:
            batches = await consumer.getmany(*assigned, timeout_ms=POLL_MS)
            for records in batches.values():
                found.extend(_switch(record.value) for record in records)
        return [switch for switch in found if switch is not None]
    finally:
        await consumer.stop()


async def record_switch(kafka: KafkaSettings, switch: ReadModelSwitched) -> None:
    """Write `switch` to the serving topic; returns once the broker acknowledged it."""
    producer = AIOKafkaProducer(**kafka.client_options(), acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(kafka.topics.serving, encode(switch), key=switch.key.encode())
    finally:
        await producer.stop()


async def synced(settings: Settings) -> Served:
    """The fold of the serving topic, stored in the deployment's database (module doc)."""
    from pymongo import MongoClient

    served = fold(await switches(settings.kafka))
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongodb.uri, tz_aware=True)
    try:
        write_served(client[deployment_database(settings)], served)
    finally:
        client.close()
    return served


async def _partitions(kafka: KafkaSettings, topic: str) -> list[int]:
    """The partitions of `topic` (none when it does not exist: no switch was ever written)."""
    admin = AIOKafkaAdminClient(**kafka.client_options())
    await admin.start()
    try:
        if topic not in set(await admin.list_topics()):
            return []
        (described,) = await admin.describe_topics([topic])
        return sorted(int(p["partition"]) for p in described["partitions"])
    finally:
        await admin.close()


def _switch(value: bytes | None) -> ReadModelSwitched | None:
    """A record of the serving topic as a switch; anything else is logged and left out."""
    try:
        event = decode(value or b"")
    except EventDecodeError as exc:
        log.warning("the serving topic holds a record that is not an event: %s", exc)
        return None
    if not isinstance(event, ReadModelSwitched):
        log.warning("the serving topic holds a %s, not a switch", event.event_type)
        return None
    return event
