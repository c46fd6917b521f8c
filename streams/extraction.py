"""An extraction stage: snapshots in, one result record per snapshot out, one group per type.

The agent only wires (docs/architecture.md, "Stages"): read the snapshot (`handlers.inputs`;
poison is dead-lettered), skip it if this type extracted it already
(`handlers.extraction.results.already_extracted`), ask the LLM and the embedder (through
outages), build the result (`extraction_result`), send it and wait for the ack, then store the
progress. A `PartitionGuard` hands the agent each snapshot record once and in order.

**A crash between sending a result and storing the progress** would make the stage extract
the snapshot again, and an LLM does not answer twice the same. So the stage never asks twice:
before extracting, it looks for a result of its own that its table does not know about
(`OwnResults`): the memories-topic records after the last result whose progress it stored,
read once per partition after every rebalance. A result found there is adopted instead of a
new answer. The projector keeps the first result per snapshot and type as well, so even a
result written by a worker that no longer owns the partition cannot mix with another.

Results go to the memories-topic partition with the snapshot's partition number (both topics
are keyed by user and have the same partition count), so one partition holds all of a
snapshot partition's results.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

import faust
import orjson
from faust.types import TP

from events.codec import encode
from events.memories import MemoryType
from events.snapshots import SnapshotExtracted, SnapshotPromoted
from handlers.extraction.base import ExtractionOutcome, Extractor, extract
from handlers.extraction.results import already_extracted, extraction_result, result_id
from handlers.inputs import InvalidRecord, read_extraction_record, read_snapshot_record
from handlers.ports import ChatModel, Embedder
from streams.app import faust_app, raw_table, raw_topic
from streams.dead_letters import dead_letter
from streams.faults import fault_point
from streams.log_reader import KafkaLogReader
from streams.progress import guard_partitions
from streams.records import InputRecord
from streams.retrying import apply_or_dead_letter, through_outages
from streams.settings import Clock, StreamSettings, utc_now

log = logging.getLogger(__name__)

WRITTEN_KEY_PREFIX = b"\x00written|"
"""Table keys of the last memories-topic offset holding a result whose progress is stored."""


def written_key(partition: int) -> bytes:
    return WRITTEN_KEY_PREFIX + str(partition).encode()


class OwnResults:
    """Results this stage wrote to the memories topic that its table may not know about."""

    def __init__(self, reader: KafkaLogReader, topic: str, memory_type: MemoryType) -> None:
        self._reader = reader
        self._topic = topic
        self._memory_type = memory_type
        self._found: dict[int, dict[str, SnapshotExtracted]] = {}

    def forget(self) -> None:
        """After a rebalance the table may hold another worker's progress: read again."""
        self._found.clear()

    async def take(
        self, partition: int, event_id: str, after: int | None
    ) -> SnapshotExtracted | None:
        """The result `event_id` if it is in `partition` after offset `after` (once)."""
        if partition not in self._found:
            start = 0 if after is None else after + 1
            tail = await self._reader.read_tail(TP(self._topic, partition), start)
            self._found[partition] = self._results_in(tail)
        return self._found[partition].pop(event_id, None)

    def _results_in(self, records: list[InputRecord]) -> dict[str, SnapshotExtracted]:
        found: dict[str, SnapshotExtracted] = {}
        for record in records:
            try:
                result = read_extraction_record(record.key, record.value)
            except InvalidRecord:
                continue
            if result is not None and result.memory_type == self._memory_type:
                found.setdefault(result.event_id, result)  # the first one written wins
        return found


def create_extraction_app(
    settings: StreamSettings,
    extractor: Extractor,
    llm: ChatModel,
    embedder: Embedder,
    clock: Clock = utc_now,
) -> faust.App:
    memory_type = extractor.memory_type
    stage = f"extract-{memory_type}"
    app = faust_app(stage, settings)
    snapshots = raw_topic(app, settings.topics.snapshots, settings)
    memories = raw_topic(app, settings.topics.memories, settings)
    dead_letters = raw_topic(app, settings.topics.dead_letters, settings)
    progress = raw_table(app, "extracted-seqs", settings)
    guard = guard_partitions(
        app,
        progress,
        bootstrap_servers=settings.bootstrap_servers,
        stage=stage,
        topics=[settings.topics.snapshots],
        group=settings.group(stage),
    )
    own_results = OwnResults(
        KafkaLogReader(settings.bootstrap_servers), settings.topics.memories, memory_type
    )

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def forget_own_results(sender: faust.App, revoked: Any, **_: Any) -> None:
        own_results.forget()

    async def extracted(snapshot: SnapshotPromoted) -> SnapshotExtracted:
        """Ask the LLM and the embedder, waiting out their outages; anything else they raise
        about this snapshot is recorded as its extraction's failure."""
        what = f"extracting {memory_type} from snapshot {snapshot.event_id}"
        try:
            outcome = await through_outages(
                partial(extract, extractor, snapshot, llm, attempts=settings.llm_attempts), what
            )
            texts = [memory.text for memory in outcome.memories]
            vectors = (
                await through_outages(partial(asyncio.to_thread, embedder.embed, texts), what)
                if texts
                else []
            )
        except Exception as exc:
            log.exception("%s failed", what)
            outcome, vectors = ExtractionOutcome((), 0, failure=f"extraction failed: {exc!r}"), []
        return extraction_result(snapshot, memory_type, outcome, vectors)

    async def apply(record: InputRecord) -> None:
        try:
            snapshot = read_snapshot_record(record.key, record.value)
        except InvalidRecord as exc:
            await dead_letter(dead_letters, record, stage=stage, reason=str(exc), clock=clock)
            return
        user_key = snapshot.key.encode()
        seqs: dict[str, int] = orjson.loads(progress.get(user_key) or b"{}")
        if already_extracted(seqs, snapshot):
            log.info("snapshot %s already extracted (%s)", snapshot.event_id, stage)
            return
        written = progress.get(written_key(record.partition))
        after = int(written) if written else None
        result_event_id = result_id(snapshot.event_id, memory_type)
        result = await own_results.take(record.partition, result_event_id, after)
        if result is not None:
            log.warning("snapshot %s: adopting this stage's earlier result", snapshot.event_id)
        else:
            result = await extracted(snapshot)
            send = partial(_sent, memories, result.key.encode(), encode(result), record.partition)
            offset = await through_outages(send, f"sending result {result.event_id}")
            fault_point("extraction.after_result_sent")
            progress[written_key(record.partition)] = str(offset).encode()
        if result.failure:
            await dead_letter(dead_letters, record, stage=stage, reason=result.failure, clock=clock)
        log.info("snapshot %s: %d %s decisions", snapshot.event_id, len(result.decisions), stage)
        seqs[snapshot.session_id] = snapshot.seq
        progress[user_key] = orjson.dumps(seqs)

    @app.agent(snapshots, concurrency=1)
    async def extract_memories(stream: faust.StreamT[bytes]) -> None:
        applied = apply_or_dead_letter(apply, dead_letters, stage=stage, clock=clock)
        async for event in stream.events():
            await guard.apply_in_order(event, applied)

    return app


async def _sent(topic: faust.TopicT, key: bytes, value: bytes, partition: int) -> int:
    """Send one record to `partition`, wait for the broker's ack, return its offset."""
    metadata = await (await topic.send(key=key, value=value, partition=partition, force=True))
    return int(metadata.offset)
