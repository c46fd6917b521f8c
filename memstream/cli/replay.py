"""`memstream replay` and `memstream verify`: rebuild the read model from the log, and check it.

**Replay** reads the events and projects them into a fresh database in bulk
(`projections.BulkWrites`: ordered `bulk_write` batches per collection), topic after topic —
turns, snapshots, memories, dead letters, each partition in log order — so a snapshot links turns
that are already there. Two sources:

* the Kafka topics (`--from-offset N` or `--from-time T` to start later in every partition);
* the read model's own collections, when the broker no longer holds the log: the events are
  rebuilt from `turns`, `snapshots` (with each extraction's `decision_ids`), `saves`,
  `rollbacks`, `consolidations`, `memory_events` and `dead_letters`, then projected the same
  way.

Records are read with the same validation as the projector (`handlers.inputs`), their sealed
content opened with the key store of the source database (a record whose key was destroyed is
forgotten and left out: docs/architecture.md, "Crypto-shredding"), and each event
keeps the partition it was read from (`LoggedEvent`), which turns store as the projector's do:
forgetting a user erases a turns partition's turns (`projections.forgetting`). Replay refuses
a database that already holds a read model: bulk claims assume they are the first.

**Verify** compares two read models document by document and lists every difference. A memory's
vector compares as the float32s it holds, so a database projected before vectors were packed
(`projections.vectors`: lists of doubles) verifies against its replay.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from pymongo.database import Database
from rich.progress import Progress

from events.codec import AnyEvent, EventDecodeError, decode, decode_payload
from events.consolidations import MemoriesConsolidated, MemoryRetired
from events.dead_letters import DeadLetterRedriven, InputDeadLettered
from events.memories import LLMUsage, MemoryEvent
from events.rollbacks import MemoryRolledBack
from events.saves import MemorySaved
from events.snapshots import SnapshotExtracted, SnapshotPromoted, SnapshotTurn
from events.turns import TurnRecorded
from handlers.inputs import InvalidRecord, read_snapshots_record, read_turns_record
from handlers.key_ring import StoreKeyRing
from handlers.sealed_events import opener
from handlers.sealing import KeyDestroyed, SealBroken
from memstream.config import KafkaSettings
from projections import ensure_indexes, project_batch
from projections.store import (
    CONSOLIDATIONS,
    DEAD_LETTERS,
    MEMORIES,
    MEMORY_EVENTS,
    PROFILES,
    ROLLBACKS,
    SAVES,
    SNAPSHOTS,
    TURNS,
)
from projections.vectors import pack_vector, unpack_vector

Db = Database[dict[str, Any]]
COMPARED = (
    TURNS,
    SNAPSHOTS,
    SAVES,
    ROLLBACKS,
    CONSOLIDATIONS,
    MEMORIES,
    MEMORY_EVENTS,
    PROFILES,
    DEAD_LETTERS,
)
BATCH_EVENTS = 2_000
END_WAIT_MS = 50


class NotEmpty(RuntimeError):
    """The target database already holds a read model."""


class IncompleteReadModel(RuntimeError):
    """The source read model names something it does not hold (the projector is behind)."""


@dataclass(frozen=True)
class LoggedEvent:
    """An event to replay and the partition it was read from (None when unknown)."""

    event: AnyEvent
    partition: int | None = None


@dataclass
class ReplayReport:
    """What a replay read and wrote."""

    events: int = 0
    skipped: int = 0
    writes: int = 0
    collisions: list[str] = field(default_factory=list)
    seconds: float = 0.0


def replay(
    events: Iterator[LoggedEvent], target: Db, *, total: int | None = None, show: bool = True
) -> ReplayReport:
    """Project `events` (in replay order) into the empty database `target`, in batches."""
    if any(target[name].estimated_document_count() for name in COMPARED):
        raise NotEmpty(f"database {target.name!r} is not empty: replay into a fresh one")
    ensure_indexes(target)
    report = ReplayReport()
    started = time.monotonic()
    with Progress(disable=not show, transient=False) as progress:
        task = progress.add_task("replaying", total=total)
        for batch in _batches(events, BATCH_EVENTS):
            outcome = project_batch(target, [(logged.event, logged.partition) for logged in batch])
            report.events += len(batch)
            report.writes += outcome.writes
            report.collisions.extend(str(error) for error in outcome.errors if error is not None)
            progress.advance(task, len(batch))
    report.seconds = time.monotonic() - started
    return report


def _batches(events: Iterator[LoggedEvent], size: int) -> Iterator[list[LoggedEvent]]:
    batch: list[LoggedEvent] = []
    for logged in events:
        batch.append(logged)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


# -- the log from Kafka ------------------------------------------------------------------------


def kafka_events(
    kafka: KafkaSettings,
    *,
    from_offset: int | None = None,
    from_time: datetime | None = None,
    keys: StoreKeyRing | None = None,
) -> list[LoggedEvent]:
    """Every event of the four topics in replay order (see the module doc), sealed content
    opened with `keys`; a record whose key was destroyed is forgotten and left out."""
    ring = keys.in_threads() if keys is not None else None
    return asyncio.run(_kafka_events(kafka, from_offset, from_time, ring))


async def _kafka_events(
    kafka: KafkaSettings,
    from_offset: int | None,
    from_time: datetime | None,
    keys: StoreKeyRing | None,
) -> list[LoggedEvent]:
    if not kafka.bootstrap_servers:
        raise ValueError("KAFKA_BOOTSTRAP_SERVERS is not set")
    topics = kafka.topics
    consumer = AIOKafkaConsumer(
        **kafka.client_options(),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    events: list[LoggedEvent] = []
    try:
        order = [
            TopicPartition(topic, partition)
            for topic in (topics.turns, topics.snapshots, topics.memories, topics.dead_letters)
            for partition in range(kafka.partitions)
        ]
        read = await _partitions(consumer, order, from_offset, from_time)
        for tp in order:
            for key, value in read.get(tp, ()):
                event = _readable(tp.topic, topics.turns, topics.snapshots, key, value, keys)
                if event is not None:
                    events.append(LoggedEvent(event, tp.partition))
    finally:
        await consumer.stop()
    return events


async def _partitions(
    consumer: AIOKafkaConsumer,
    tps: list[TopicPartition],
    from_offset: int | None,
    from_time: datetime | None,
) -> dict[TopicPartition, list[tuple[bytes | None, bytes | None]]]:
    """Every record of every partition in `tps` from the start position to its end, each in log
    order. All partitions are fetched together, and the end is known when every position has
    reached its end offset and a short fetch (`END_WAIT_MS`) brings nothing more. Tansu's end
    offsets can be short (the first offset of a partition's newest batch, plus one), but a
    consumer receives record batches whole: once a position has passed that offset the rest of
    the batch is already in the consumer and comes at once, so the wait is paid once, and
    short."""
    starts: dict[TopicPartition, int | None] = {tp: from_offset for tp in tps}
    if from_time is not None:
        stamp = int(from_time.timestamp() * 1000)
        found = await consumer.offsets_for_times({tp: stamp for tp in tps})
        starts = {tp: f.offset for tp, f in found.items() if f is not None and f.timestamp >= 0}
    active = [tp for tp in tps if tp in starts]
    if not active:
        return {}
    consumer.assign(active)
    for tp in active:
        start = starts[tp]
        if start is None:
            await consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, start)
    ends = await consumer.end_offsets(active)
    records: dict[TopicPartition, list[tuple[bytes | None, bytes | None]]] = {
        tp: [] for tp in active
    }
    while True:
        reached = all([await consumer.position(tp) >= ends[tp] for tp in active])
        batches = await consumer.getmany(*active, timeout_ms=END_WAIT_MS if reached else 500)
        for tp, batch in batches.items():
            records[tp].extend((r.key, r.value) for r in batch)
        if not batches and reached:
            return records


def _readable(
    topic: str,
    turns: str,
    snapshots: str,
    key: bytes | None,
    value: bytes | None,
    keys: StoreKeyRing | None,
) -> AnyEvent | None:
    try:
        if topic == turns:
            return read_turns_record(key, value, keys)
        if topic == snapshots:
            return read_snapshots_record(key, value, keys)
        return decode(value or b"", opener(keys))
    except (InvalidRecord, EventDecodeError, SealBroken):
        return None  # refused upstream and dead-lettered there; nothing to project
    except KeyDestroyed:
        return None  # forgotten: its key was destroyed


# -- the log rebuilt from the read model ------------------------------------------------------


def collection_events(source: Db) -> Iterator[LoggedEvent]:
    """The events the read model `source` was projected from, in replay order, each turn with
    the partition it was read from (None for the rest, and for turns projected before turns
    kept it). What was erased is gone from the collections, and so from this replay; the
    receipts in `erasures` are not rebuilt."""
    turns = {t["_id"]: t for t in source[TURNS].find()}
    for turn in sorted(turns.values(), key=lambda t: (t["recorded_at"], t["_id"])):
        yield LoggedEvent(_turn(turn), turn.get("partition"))
    for event in _events_after_turns(source, turns):
        yield LoggedEvent(event)


def _events_after_turns(source: Db, turns: dict[str, dict[str, Any]]) -> Iterator[AnyEvent]:
    for snapshot in (
        source[SNAPSHOTS]
        .find({"turn_ids": {"$exists": True}})
        .sort([("promoted_at", 1), ("_id", 1)])
    ):
        yield _snapshot(snapshot, turns)
    logged = {e["_id"]: e for e in source[MEMORY_EVENTS].find()}
    claimed: set[str] = set()
    results: list[SnapshotExtracted | MemorySaved | MemoryRolledBack | MemoriesConsolidated] = []
    for snapshot in source[SNAPSHOTS].find({"extractions": {"$exists": True}}):
        for memory_type, record in snapshot["extractions"].items():
            results.append(_extraction(snapshot, memory_type, record, logged))
            claimed.update(record.get("decision_ids", []))
    for save in source[SAVES].find():
        results.append(_save(save, logged))
        claimed.update(save.get("decision_ids", []))
    for rollback in source[ROLLBACKS].find():
        decisions = _decisions(rollback.get("decision_ids", []), logged)
        fields = _fields(rollback, MemoryRolledBack) | {"decisions": tuple(decisions)}
        results.append(
            MemoryRolledBack(event_id=rollback["_id"], occurred_at=rollback["at"], **fields)
        )
        claimed.update(rollback.get("decision_ids", []))
    for run in source[CONSOLIDATIONS].find():
        results.append(_consolidation(run, logged))
        claimed.update(run.get("decision_ids", []))
        claimed.update(each["event_id"] for each in run.get("retired") or ())
    yield from sorted(results, key=lambda r: (r.occurred_at, r.event_id))
    for entry in sorted(logged.values(), key=lambda e: (e["occurred_at"], e["_id"])):
        if entry["_id"] not in claimed:  # a memory event recorded on its own (0.1)
            yield decode_payload(entry["event"])
    redrives: list[DeadLetterRedriven] = []
    for letter in source[DEAD_LETTERS].find().sort("dead_lettered_at", 1):
        redrives.extend(
            DeadLetterRedriven(dead_letter_id=letter["_id"], **entry)
            for entry in letter.get("redrives") or ()
        )
        if "stage" in letter:
            yield InputDeadLettered(
                event_id=letter["_id"],
                occurred_at=letter["occurred_at"],
                **_fields(letter, InputDeadLettered),
            )
    yield from sorted(redrives, key=lambda r: (r.occurred_at, r.event_id))


def _fields(document: dict[str, Any], model: Any) -> dict[str, Any]:
    names = set(model.model_fields) - {"event_id", "event_type", "schema_version", "occurred_at"}
    return {name: document[name] for name in names if name in document}


def _turn(document: dict[str, Any]) -> TurnRecorded:
    return TurnRecorded(
        event_id=document["_id"],
        occurred_at=document["occurred_at"],
        **_fields(document, TurnRecorded),
    )


def _snapshot(document: dict[str, Any], turns: dict[str, dict[str, Any]]) -> SnapshotPromoted:
    missing = [turn_id for turn_id in document["turn_ids"] if turn_id not in turns]
    if missing:  # the projector applies the turns and snapshots topics independently
        raise IncompleteReadModel(
            f"snapshot {document['_id']} names turn {missing[0]}, which is not in {TURNS} yet "
            "(the projector is behind): wait until `memstream status` shows no lag, or replay "
            "from the log"
        )
    return SnapshotPromoted(
        event_id=document["_id"],
        occurred_at=document["promoted_at"],
        user_id=document["user_id"],
        session_id=document["session_id"],
        agent_id=document.get("agent_id"),
        seq=document["seq"],
        reason=document["reason"],
        turns=tuple(
            SnapshotTurn(
                turn_id=turn_id,
                role=turns[turn_id]["role"],
                name=turns[turn_id].get("name"),
                tool_name=turns[turn_id].get("tool_name"),
                content=turns[turn_id]["content"],
                occurred_at=turns[turn_id]["occurred_at"],
            )
            for turn_id in document["turn_ids"]
        ),
    )


def _consolidation(run: dict[str, Any], logged: dict[str, dict[str, Any]]) -> MemoriesConsolidated:
    """A consolidation run's record, from its document and the entries it logged."""
    retired = [
        MemoryRetired.model_validate(
            {k: v for k, v in logged[each["event_id"]]["event"].items() if k != "consolidation_id"}
        )
        for each in run.get("retired") or ()
        if each["event_id"] in logged
    ]
    fields = _fields(run, MemoriesConsolidated) | {
        "decisions": tuple(_decisions(run.get("decision_ids", []), logged)),
        "retired": tuple(retired),
    }
    return MemoriesConsolidated(event_id=run["_id"], occurred_at=run["at"], **fields)


def _decisions(ids: Sequence[str], logged: dict[str, dict[str, Any]]) -> list[MemoryEvent]:
    return [decode_payload(logged[i]["event"]) for i in ids if i in logged]  # type: ignore[misc]


def _extraction(
    snapshot: dict[str, Any],
    memory_type: str,
    record: dict[str, Any],
    logged: dict[str, dict[str, Any]],
) -> SnapshotExtracted:
    return SnapshotExtracted(
        event_id=record["event_id"],
        occurred_at=record["at"],
        snapshot_id=snapshot["_id"],
        user_id=snapshot["user_id"],
        session_id=snapshot["session_id"],
        agent_id=snapshot.get("agent_id"),
        memory_type=memory_type,
        decisions=tuple(_decisions(record.get("decision_ids", []), logged)),
        attempts=record["attempts"],
        failure=record.get("failure"),
        usage=LLMUsage.model_validate(record.get("usage") or {}),
        redrive_id=record.get("redrive_id"),
    )


def _save(save: dict[str, Any], logged: dict[str, dict[str, Any]]) -> MemorySaved:
    return MemorySaved(
        event_id=save["_id"],
        occurred_at=save["at"],
        save_id=save["save_id"],
        user_id=save["user_id"],
        agent_id=save.get("agent_id"),
        memory_type=save["memory_type"],
        decisions=tuple(_decisions(save.get("decision_ids", []), logged)),
        usage=LLMUsage.model_validate(save.get("usage") or {}),
    )


# -- verify ------------------------------------------------------------------------------------


def differences(left: Db, right: Db, *, limit: int = 50) -> list[str]:
    """What differs between two read models, document by document (at most `limit` lines)."""
    found: list[str] = []
    for name in COMPARED:
        mine = {d["_id"]: _compared(name, d) for d in left[name].find()}
        theirs = {d["_id"]: _compared(name, d) for d in right[name].find()}
        for missing in sorted(set(mine) - set(theirs), key=str):
            found.append(f"{name} {missing!r}: only in {left.name}")
        for extra in sorted(set(theirs) - set(mine), key=str):
            found.append(f"{name} {extra!r}: only in {right.name}")
        for doc_id in sorted(set(mine) & set(theirs), key=str):
            for path in _changed(mine[doc_id], theirs[doc_id]):
                found.append(f"{name} {doc_id!r}: {path} differs")
        if len(found) >= limit:
            return found[:limit]
    return found


def _compared(collection: str, document: dict[str, Any]) -> dict[str, Any]:
    """`document` as verify compares it: a memory's vector packed, in whichever form it was
    stored."""
    if collection == MEMORIES and "embedding" in document:
        return {**document, "embedding": pack_vector(unpack_vector(document["embedding"]))}
    return document


def _changed(left: Any, right: Any, path: str = "") -> list[str]:
    if isinstance(left, dict) and isinstance(right, dict):
        paths: list[str] = []
        for key in sorted(set(left) | set(right), key=str):
            paths.extend(
                _changed(left.get(key), right.get(key), f"{path}.{key}" if path else str(key))
            )
        return paths
    return [] if left == right else [path or "<document>"]
