"""Sending a stage's records: every send waits for the broker's acknowledgement.

A stage marks an input applied only after its outputs are acknowledged, so a crash between the
two repeats the send (at-least-once) and the output's event id dedupes it downstream.

`sent_in_key_order` sends a batch's records at once and waits for all acknowledgements, with one
rule: records with the same key go one after the other. Two snapshots of one user sent
together could otherwise land out of order when the first send fails and is retried after the
second succeeded (the broker outages `through_outages` waits out), and a user's snapshots must
reach the memory types' stages in the order the window promoted them. Different keys have no
order to keep, so they are sent concurrently: a batch costs about one round trip per record of
its busiest key, not one per record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import faust

from streams.metrics import RECORDS_OUT
from streams.retrying import through_outages


async def sent_by_key(topic: faust.TopicT, key: bytes, value: bytes) -> None:
    """Send one record to the partition of its key and wait for the broker's ack."""
    await (await topic.send(key=key, value=value, force=True))
    RECORDS_OUT.labels(topic.get_topic_name()).inc()


async def sent_to(topic: faust.TopicT, key: bytes, value: bytes, partition: int) -> int:
    """Send one record to `partition`, wait for the broker's ack, return its offset."""
    metadata = await (await topic.send(key=key, value=value, partition=partition, force=True))
    RECORDS_OUT.labels(topic.get_topic_name()).inc()
    return int(metadata.offset)


@dataclass(frozen=True)
class Outgoing:
    """One record a stage is to send: where, what, and what to call it in log lines."""

    topic: faust.TopicT
    key: bytes | None
    value: bytes
    what: str
    partition: int | None = None


async def sent_in_key_order(outgoing: Sequence[Outgoing]) -> list[int]:
    """Send every record and wait until all are acknowledged (through outages), one key's
    records in order; the offsets, in the order of `outgoing`."""
    offsets = [-1] * len(outgoing)
    by_key: dict[tuple[str, bytes | None], list[int]] = {}
    for index, record in enumerate(outgoing):
        by_key.setdefault((record.topic.get_topic_name(), record.key), []).append(index)

    async def send_in_order(indexes: list[int]) -> None:
        for index in indexes:
            record = outgoing[index]
            offsets[index] = await through_outages(partial(_sent, record), f"sending {record.what}")

    await asyncio.gather(*(send_in_order(indexes) for indexes in by_key.values()))
    return offsets


async def _sent(record: Outgoing) -> int:
    metadata = await (
        await record.topic.send(
            key=record.key, value=record.value, partition=record.partition, force=True
        )
    )
    RECORDS_OUT.labels(record.topic.get_topic_name()).inc()
    return int(metadata.offset)
