"""The expiry timer of a memory type's stage (docs/architecture.md, "Expiry").

It only notices, by the wall clock, that a memory version is due: it writes a `MemoryExpired`
command (`handlers.expiry`) to the snapshots topic, and the stage forgets the memory when it
reads the command back, in order with the user's other records. Due memories are read from the
read model (a query on `expires_at`), and each worker writes commands only for the users of the
snapshots-topic partitions it owns (the partition a user's records go to: the producer's
murmur2 of the key), once per command while it is due; a command written twice (by a worker that
just lost the partition) is the same command, which the stage applies once.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust
from aiokafka.partitioner import murmur2

from events.codec import encode
from events.memories import MemoryType
from handlers.expiry import due_expiries
from handlers.ports import StageReadModel
from streams.sending import sent_by_key
from streams.settings import Clock, StreamSettings

log = logging.getLogger(__name__)


def partition_of(key: str, partitions: int) -> int:
    """The partition the default (murmur2) partitioner gives a record with this key."""
    hashed: int = murmur2(key.encode())
    return (hashed & 0x7FFFFFFF) % partitions


class ExpiryTimer:
    """Writes the expiry commands of the due memories of this worker's users."""

    def __init__(
        self,
        memory_type: MemoryType,
        read_model: StageReadModel,
        snapshots: faust.TopicT,
        settings: StreamSettings,
        clock: Clock,
    ) -> None:
        self._memory_type = memory_type
        self._read_model = read_model
        self._snapshots = snapshots
        self._settings = settings
        self._clock = clock
        self._sent: set[str] = set()

    async def run(self, app: Any) -> None:
        if app.rebalancing or app.tables.recovery.in_recovery:
            return
        try:
            await self._request_expiries(app)
        except Exception:  # the timer must survive whatever one scan ran into
            log.exception(
                "expiry scan failed; the next one runs in %s",
                self._settings.expiry_check_interval,
            )

    async def _request_expiries(self, app: Any) -> None:
        topic = self._settings.topics.snapshots
        mine = {tp.partition for tp in app.consumer.assignment() if tp.topic == topic}
        if not mine:
            return
        now = self._clock()
        due = await asyncio.to_thread(self._read_model.due_memories, self._memory_type, now)
        partitions = self._settings.partitions
        held = [m for m in due if m.user_id and partition_of(m.user_id, partitions) in mine]
        commands = due_expiries(held, self._memory_type, now)
        self._sent.intersection_update(command.event_id for command in commands)  # forgotten
        for command in commands:
            if command.event_id in self._sent:
                continue
            await sent_by_key(self._snapshots, command.key.encode(), encode(command))
            self._sent.add(command.event_id)
