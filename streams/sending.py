"""Sending a stage's records: each send waits for the broker's acknowledgement.

A stage marks an input applied only after its outputs are acknowledged, so a crash between the
two repeats the send (at-least-once) and the output's event id dedupes it downstream.
"""

from __future__ import annotations

import faust


async def sent_by_key(topic: faust.TopicT, key: bytes, value: bytes) -> None:
    """Send one record to the partition of its key and wait for the broker's ack."""
    await (await topic.send(key=key, value=value, force=True))


async def sent_to(topic: faust.TopicT, key: bytes, value: bytes, partition: int) -> int:
    """Send one record to `partition`, wait for the broker's ack, return its offset."""
    metadata = await (await topic.send(key=key, value=value, partition=partition, force=True))
    return int(metadata.offset)
