"""A memory type's stage's own records that the read model may not hold yet.

The stage reconciles against the read model's memories with these laid over them
(`handlers.known_state`). They are the records it wrote to the memories topic after the last
one the projector applied — the projector records that offset per partition in the read model
(`projections.progress`) after writing its effects — so what is kept here is bounded by the
projector's lag, not by history:

* when the stage first needs a partition (after every rebalance: another worker may have
  written to it meanwhile), it reads the partition's tail after the projected offset and keeps
  its own records (`ready`);
* every record it writes is added (`add`);
* at most once per `REFRESH_SECONDS` per partition it reads the projected offset again and
  drops what is at or below it (`refresh`).

Why this is enough (read-your-writes): a user's state is taken as `of_user` *first*, then the
read model is read. Every record dropped before that copy is at or below an offset the
projector had applied before that read, so the read model holds it; every later record is in
the copy. The user's own records are written one after the other (`streams.concurrency`), so no
record of the user can be added between the copy and the read.

The same records say what this stage has done already: the result of a snapshot or a save it
wrote before a crash (adopted instead of asking the LLM again — an LLM does not answer twice
the same) and the forget facts it wrote (`find`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection

from faust.types import TP

from events.codec import EventDecodeError, decode
from events.memories import MemoryType
from handlers.known_state import OwnRecord, is_own
from handlers.ports import StageReadModel
from handlers.sealed_events import KeyRing, opener
from handlers.sealing import KeyDestroyed, SealBroken
from streams.log_reader import KafkaLogReader
from streams.records import InputRecord
from streams.retrying import through_outages

log = logging.getLogger(__name__)

REFRESH_SECONDS = 1.0
"""How often a partition's projected offset is read again to drop what the read model holds."""


class OwnDecisions:
    """This stage's records on the memories topic after the projector's offset, per partition
    and per user, in the order they were written."""

    def __init__(
        self,
        reader: KafkaLogReader,
        topic: str,
        memory_type: MemoryType,
        read_model: StageReadModel,
        keys: KeyRing | None = None,
    ) -> None:
        self._reader = reader
        self._topic = topic
        self._memory_type = memory_type
        self._read_model = read_model
        self._keys = keys
        self._records: dict[int, dict[int, OwnRecord]] = {}
        self._by_user: dict[str, list[tuple[int, int]]] = {}
        self._by_id: dict[str, tuple[int, int]] = {}
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._checked: dict[int, float] = {}

    @property
    def held(self) -> int:
        """How many records are kept (all partitions)."""
        return sum(len(records) for records in self._records.values())

    async def ready(self, partition: int) -> None:
        """Load the partition's unprojected records once (per assignment)."""
        loading = self._loading.get(partition)
        if loading is None:
            loading = asyncio.create_task(self._load(partition))
            self._loading[partition] = loading
        try:
            await asyncio.shield(loading)
        except BaseException:
            if loading.done() and self._loading.get(partition) is loading:
                del self._loading[partition]  # the next record tries again
            raise

    def add(self, partition: int, offset: int, record: OwnRecord) -> None:
        records = self._records.setdefault(partition, {})
        if offset in records:
            return
        records[offset] = record
        self._by_user.setdefault(record.user_id, []).append((partition, offset))
        self._by_id.setdefault(record.event_id, (partition, offset))

    def of_user(self, user_id: str) -> list[OwnRecord]:
        """The user's records, in the order they were written."""
        found = []
        for partition, offset in self._by_user.get(user_id, ()):
            record = self._records.get(partition, {}).get(offset)
            if record is not None:
                found.append(record)
        return found

    def find(self, event_id: str) -> OwnRecord | None:
        """The first record written under `event_id`, if it is kept."""
        where = self._by_id.get(event_id)
        if where is None:
            return None
        return self._records.get(where[0], {}).get(where[1])

    async def refresh(self, partition: int) -> None:
        """Drop the partition's records the read model holds (at most once a second)."""
        now = time.monotonic()
        if now - self._checked.get(partition, 0.0) < REFRESH_SECONDS:
            return
        self._checked[partition] = now
        projected = await self._projected(partition)
        if projected is not None:
            self._drop(partition, projected)

    def forget(self, partitions: Collection[int]) -> None:
        """After a rebalance: read the partitions again when they are needed."""
        for partition in partitions:
            task = self._loading.pop(partition, None)
            if task is not None:
                task.cancel()
            self._checked.pop(partition, None)
            self._drop(partition, None)

    async def _load(self, partition: int) -> None:
        projected = await self._projected(partition)
        start = 0 if projected is None else projected + 1
        tail = await self._reader.read_tail(TP(self._topic, partition), start)
        own = await asyncio.to_thread(self._own_records, tail)
        for offset, record in own:
            self.add(partition, offset, record)
        self._checked[partition] = time.monotonic()
        log.info(
            "%s: %d of its records on %s[%d] after offset %s are not projected yet",
            self._memory_type,
            len(own),
            self._topic,
            partition,
            projected,
        )

    async def _projected(self, partition: int) -> int | None:
        offsets = await through_outages(
            lambda: asyncio.to_thread(self._read_model.projected_offsets, [partition]),
            f"reading the projector's progress on {self._topic}[{partition}]",
        )
        return offsets.get(partition)

    def _drop(self, partition: int, through: int | None) -> None:
        """Drop the partition's records at or below `through` (None: all of them)."""
        records = self._records.get(partition)
        if not records:
            return
        doomed = [offset for offset in records if through is None or offset <= through]
        for offset in doomed:
            record = records.pop(offset)
            kept = self._by_user.get(record.user_id, [])
            kept[:] = [where for where in kept if where != (partition, offset)]
            if not kept:
                self._by_user.pop(record.user_id, None)
            if self._by_id.get(record.event_id) == (partition, offset):
                del self._by_id[record.event_id]

    def _own_records(self, tail: list[InputRecord]) -> list[tuple[int, OwnRecord]]:
        """This stage's records among `tail` (opening them may look keys up: in a thread)."""
        own: list[tuple[int, OwnRecord]] = []
        open_content = opener(self._keys)
        for record in tail:
            try:
                event = decode(record.value or b"", open_content)
            except (EventDecodeError, SealBroken, KeyDestroyed):
                continue  # not ours to read, or forgotten meanwhile
            if is_own(event, self._memory_type):
                own.append((record.offset, event))  # type: ignore[arg-type]
        return own
