"""Results a stage wrote that its table may not know about: the crash between output and progress.

A stage writes a result record, then stores its progress. Killed in between, it would process
the input again when it restarts — and an LLM does not answer twice the same. So before deciding
anything, the stage looks for a result of its own after the last one whose progress it stored:
`OwnResults` reads that tail of its output partition once per partition after every rebalance,
and the stage adopts a result it finds there instead of deciding again
(docs/architecture.md, "Ids and atomicity").
"""

from __future__ import annotations

import asyncio

from faust.types import TP

from events.memories import MemoryType
from handlers.inputs import InvalidRecord, ResultRecord, read_result_record
from handlers.sealing import KeyDestroyed
from projections.data_keys import StoreKeyRing
from streams.log_reader import KafkaLogReader
from streams.records import InputRecord

WRITTEN_KEY_PREFIX = b"\x00written|"
"""Table keys of the last output offset holding a result whose progress is stored."""


def written_key(partition: int) -> bytes:
    return WRITTEN_KEY_PREFIX + str(partition).encode()


class OwnResults:
    """The results of one memory type written to one output topic, read back on demand."""

    def __init__(
        self,
        reader: KafkaLogReader,
        topic: str,
        memory_type: MemoryType,
        keys: StoreKeyRing | None = None,
    ) -> None:
        self._reader = reader
        self._keys = keys.in_threads() if keys is not None else None
        self._topic = topic
        self._memory_type = memory_type
        self._found: dict[int, dict[str, ResultRecord]] = {}

    def forget(self) -> None:
        """After a rebalance the table may hold another worker's progress: read again."""
        self._found.clear()

    async def take(self, partition: int, event_id: str, after: int | None) -> ResultRecord | None:
        """The result `event_id` if it is in `partition` after offset `after` (at most once)."""
        if partition not in self._found:
            start = 0 if after is None else after + 1
            tail = await self._reader.read_tail(TP(self._topic, partition), start)
            # in a thread: opening the results may look their memories' keys up
            self._found[partition] = await asyncio.to_thread(self._results_in, tail)
        return self._found[partition].pop(event_id, None)

    def _results_in(self, records: list[InputRecord]) -> dict[str, ResultRecord]:
        found: dict[str, ResultRecord] = {}
        for record in records:
            try:
                result = read_result_record(record.key, record.value, self._keys)
            except (InvalidRecord, KeyDestroyed):
                continue
            if result is not None and result.memory_type == self._memory_type:
                found.setdefault(result.event_id, result)  # the first one written wins
        return found
