"""A memory type's stage: snapshots and direct saves in, one result record each out.

One stage (and consumer group) per memory type, always running: it extracts its kind of
knowledge from every snapshot when the type is enabled, and reconciles direct saves of its type
either way (docs/architecture.md, "Stages"). The agent only wires:

* **a snapshot** — skip it if already extracted (`already_extracted`) or if extraction of this
  type is disabled; otherwise ask the LLM (`extract`), embed what it found, reconcile it with the
  memories this stage knows (`handlers.reconcile`), write one `SnapshotExtracted` record;
* **a save request** — skip a save seen before; embed, reconcile, write one `MemorySaved`.

Every call to the LLM, the embedder and the broker waits outages out (`streams.retrying`).
Before deciding, the stage adopts a result of its own that it wrote before a crash
(`streams.own_results`); after writing (or adopting) a record it applies the record's decisions
to its known memories (`streams.memory_state`) and stores its progress. Results go to the
memories-topic partition with the input's partition number (both topics are keyed by user and
have the same partition count).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import faust
import orjson
from faust.types import TP

from events.codec import encode
from events.forgetting import MemoryExpired, MemoryForgotten, SessionsForgotten, UserForgotten
from events.memories import MemoryEvent, MemoryType, Provenance
from events.saves import MemorySaveRequested
from events.snapshots import SnapshotExtracted, SnapshotPromoted
from handlers import reconcile_prompt
from handlers.dead_letters import Redrive, applies_to
from handlers.expiry import due_expiries, with_expiry
from handlers.extraction.base import ExtractionOutcome, Extractor, extract
from handlers.extraction.results import (
    already_extracted,
    extraction_record,
    result_id,
    rounded,
    save_record,
    save_result_id,
    save_source,
    snapshot_source,
    usage_of,
)
from handlers.failures import failure_reason
from handlers.forgetting import (
    StageForgetInput,
    applies_to_type,
    forget_ahead,
    memories_forgotten,
    memories_to_forget,
)
from handlers.inputs import (
    InvalidRecord,
    ResultRecord,
    SnapshotsTopicEvent,
    read_snapshots_record,
)
from handlers.ports import ChatAnswer, ChatModel, Embedder
from handlers.reconcile import (
    Answer,
    NewMemory,
    Option,
    Source,
    Thresholds,
    evolve,
    reconcile,
)
from handlers.sealed_events import NoKeyStore
from handlers.sealing import KeyDestroyed
from projections.data_keys import with_keys
from streams.app import faust_app, raw_table, raw_topic
from streams.dead_letters import dead_letter
from streams.faults import fault_point
from streams.log_reader import KafkaLogReader
from streams.memory_state import KnownMemories, StoredMemories
from streams.own_results import OwnResults, written_key
from streams.progress import TableProgress, guard_partitions
from streams.records import InputRecord
from streams.retrying import apply_or_dead_letter, through_outages
from streams.sealing import NO_KEYS, StageKeys
from streams.sending import sent_by_key, sent_to
from streams.settings import Clock, StreamSettings, utc_now

log = logging.getLogger(__name__)
FORGET_LOOKAHEAD = 200
"""How many later records of its partition a stage reads, before and after asking the LLM about
a snapshot, for a forget of the snapshot's session (docs/architecture.md, "Forgetting")."""


@dataclass(frozen=True)
class MemoryModels:
    """The LLM and the embedder a memory type's stage uses, with the names it records."""

    llm: ChatModel
    llm_model: str
    embedder: Embedder
    thresholds: Thresholds


def create_extraction_app(
    settings: StreamSettings,
    memory_type: MemoryType,
    extractor: Extractor | None,
    models: MemoryModels,
    *,
    clock: Clock = utc_now,
    keys: StageKeys = NO_KEYS,
) -> faust.App:
    """The stage of `memory_type`; without an `extractor` (the type is not enabled) it only
    reconciles direct saves and makes no LLM call for snapshots."""
    stage = f"extract-{memory_type}"
    app = faust_app(stage, settings)
    snapshots = raw_topic(app, settings.topics.snapshots, settings)
    memories = raw_topic(app, settings.topics.memories, settings)
    dead_letters = raw_topic(app, settings.topics.dead_letters, settings)
    progress = raw_table(app, "extracted-seqs", settings)
    progress_store = TableProgress(progress)
    guard = guard_partitions(
        app,
        progress_store,
        bootstrap_servers=settings.bootstrap_servers,
        stage=stage,
        topics=[settings.topics.snapshots],
        group=settings.group(stage),
    )
    log_reader = KafkaLogReader(settings.bootstrap_servers)
    own_results = OwnResults(log_reader, settings.topics.memories, memory_type, keys.ring)
    known_memories = KnownMemories(progress, keys.ring, seal=keys.seal)

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def forget_own_results(sender: faust.App, revoked: Any, **_: Any) -> None:
        own_results.forget()

    def provenance(prompt_version: str | None) -> Provenance:
        return Provenance(
            prompt_version=prompt_version,
            llm_model=models.llm_model,
            embedding_model=models.embedder.model_name,
            embedding_dimensions=models.embedder.dimension,
        )

    async def embedded(texts: Sequence[str], what: str) -> list[tuple[float, ...]]:
        if not texts:
            return []
        vectors = await through_outages(
            partial(asyncio.to_thread, models.embedder.embed, texts), what
        )
        return [rounded(vector) for vector in vectors]

    async def reconciled(
        news: list[NewMemory], source: Source, stamp: Provenance, what: str
    ) -> tuple[list[MemoryEvent], list[ChatAnswer]]:
        """The decisions about `news`, and the answers of the LLM calls they took."""
        answers: list[ChatAnswer] = []

        async def ask(new: NewMemory, options: Sequence[Option]) -> Answer | None:
            answer, given = await through_outages(
                partial(
                    reconcile_prompt.ask,
                    models.llm,
                    new,
                    options,
                    attempts=settings.llm_attempts,
                    max_answer_bytes=settings.extraction_limits.max_answer_bytes,
                ),
                f"{what}: asking about an ambiguous memory",
            )
            answers.extend(given)
            return answer

        stored = known_memories.stored(source.user_id)
        await keys.load(stored.key_ids)
        known = await with_keys(lambda: stored.opened(source.agent_id))
        result = await reconcile(
            memory_type,
            news,
            known.values(),
            source=source,
            provenance=stamp,
            thresholds=models.thresholds,
            ask=ask,
        )
        for note in result.notes:
            log.info("%s: %s", what, note)
        return list(result.events), answers

    async def forgotten_ahead(record: InputRecord, snapshot: SnapshotPromoted) -> str | None:
        """A forget of the snapshot's session already written after it, if any (a look ahead
        of `FORGET_LOOKAHEAD` records in its partition)."""
        tp = TP(record.topic, record.partition)
        later = await log_reader.read_ahead(tp, record.offset + 1, FORGET_LOOKAHEAD)
        return forget_ahead(snapshot, _readable_events(later))

    async def extracted(
        extractor: Extractor,
        snapshot: SnapshotPromoted,
        record: InputRecord,
        redrive: Redrive | None,
    ) -> ResultRecord:
        """Ask the LLM and the embedder (waiting out their outages) and reconcile; anything
        else they raise about this snapshot is recorded as its extraction's failure. A snapshot
        whose session is forgotten further on in the log, before the LLM is asked or before the
        result is written, gets a result without decisions."""
        what = f"{stage} of snapshot {snapshot.event_id}"
        unasked = ExtractionOutcome((), 0)
        if (request := await forgotten_ahead(record, snapshot)) is not None:
            log.info("%s: not extracted, its session is forgotten (%s)", what, request)
            return extraction_record(snapshot, memory_type, unasked, [], usage_of([]))
        try:
            outcome = await through_outages(
                partial(
                    extract,
                    extractor,
                    snapshot,
                    models.llm,
                    attempts=settings.llm_attempts,
                    limits=settings.extraction_limits,
                ),
                what,
            )
            vectors = await embedded([m.text for m in outcome.memories], what)
            news = [NewMemory(c, v) for c, v in zip(outcome.memories, vectors, strict=True)]
            stamp = provenance(extractor.prompt_version)
            decisions, asked = await reconciled(news, snapshot_source(snapshot), stamp, what)
            decisions = with_expiry(decisions, retention=settings.retention.get(memory_type))
        except Exception as exc:
            log.exception("%s failed", what)
            failed = ExtractionOutcome((), 0, failure=f"extraction failed: {exc!r}")
            outcome, decisions, asked = failed, [], []
        usage = usage_of([*outcome.answers, *asked])
        if decisions and (request := await forgotten_ahead(record, snapshot)) is not None:
            log.info(
                "%s: decisions dropped, its session was forgotten meanwhile (%s)", what, request
            )
            outcome, decisions = unasked, []
        return extraction_record(
            snapshot,
            memory_type,
            outcome,
            decisions,
            usage,
            redrive_id=redrive.redrive_id if redrive else None,
        )

    async def saved(request: MemorySaveRequested) -> ResultRecord:
        what = f"{stage} of save {request.event_id}"
        (vector,) = await embedded([request.content.text], what)
        decisions, asked = await reconciled(
            [NewMemory(request.content, vector)], save_source(request), provenance(None), what
        )
        retention = settings.retention.get(memory_type)
        decisions = with_expiry(decisions, retention=retention, requested=request.expires_at)
        return save_record(request, decisions, usage_of(asked))

    async def result_for(
        record: InputRecord, event_id: str, decide: Callable[[], Awaitable[ResultRecord]]
    ) -> ResultRecord:
        """The stage's own earlier result if it wrote one, else a new one, written and waited
        for."""
        written = progress.get(written_key(record.partition))
        after = int(written) if written else None
        result = await own_results.take(record.partition, event_id, after)
        if result is not None:
            log.warning("%s: adopting the result it wrote before a restart", event_id)
            return result
        result = await decide()
        record_bytes = await keys.encode(result)
        send = partial(sent_to, memories, result.key.encode(), record_bytes, record.partition)
        offset = await through_outages(send, f"sending result {result.event_id}")
        fault_point("extraction.after_result_sent")
        progress[written_key(record.partition)] = str(offset).encode()
        return result

    async def remember(result: ResultRecord) -> None:
        stored = known_memories.stored(result.user_id)
        await keys.load(stored.key_ids)
        await with_keys(lambda: _remember(result, stored))

    def _remember(result: ResultRecord, stored: StoredMemories) -> None:
        # Repeated whole if a key is missing: it opens and writes the same again.
        before = stored.opened(result.agent_id)
        known_memories.store(result.user_id, before, evolve(before, result.decisions))

    async def apply(record: InputRecord) -> None:
        redrive = record.redrive
        if not applies_to(redrive, stage):  # a redrive addressed to another stage
            return
        if redrive is not None and progress.get(_redriven_key(redrive)):
            return  # this redrive was applied already (two operators sent the same one)
        try:
            event = await keys.read(read_snapshots_record, record.key, record.value)
        except KeyDestroyed:  # its session, user or save was forgotten: nothing to learn
            log.info("%s: skipped a forgotten record at %s", stage, record.position)
            return
        except InvalidRecord as exc:
            await dead_letter(dead_letters, record, stage=stage, reason=str(exc), clock=clock)
            return
        if isinstance(event, MemoryForgotten | SessionsForgotten | UserForgotten | MemoryExpired):
            await forget(event, record.partition)
            return
        if isinstance(event, MemorySaveRequested):
            if event.memory_type != memory_type or known_memories.saved_before(
                event.user_id, event.event_id
            ):
                return
            result = await result_for(
                record, save_result_id(event.event_id, memory_type), partial(saved, event)
            )
            await remember(result)
            known_memories.remember_save(event.user_id, event.event_id)
            log.info("save %s: %s", event.event_id, [d.event_type for d in result.decisions])
            return
        user_key = event.key.encode()
        seqs: dict[str, int] = orjson.loads(progress.get(user_key) or b"{}")
        # A redrive of a snapshot this stage dead-lettered is extracted again, whatever its seq.
        if extractor is None or (redrive is None and already_extracted(seqs, event)):
            return
        redrive_id = redrive.redrive_id if redrive else None
        result = await result_for(
            record,
            result_id(event.event_id, memory_type, redrive_id),
            partial(extracted, extractor, event, record, redrive),
        )
        await remember(result)
        if isinstance(result, SnapshotExtracted) and result.failure:
            reason = failure_reason(result.failure, result.event_id, sealed=keys.seal)
            await dead_letter(dead_letters, record, stage=stage, reason=reason, clock=clock)
        log.info(
            "snapshot %s: %s (%s)",
            event.event_id,
            [d.event_type for d in result.decisions],
            result.usage,
        )
        seqs[event.session_id] = max(event.seq, seqs.get(event.session_id, -1))
        progress[user_key] = orjson.dumps(seqs)
        if redrive is not None:
            progress[_redriven_key(redrive)] = b"1"

    async def forget(request: StageForgetInput, partition: int) -> None:
        """Erase what `request` forgets from the memories this stage reconciles against, after
        saying so on the memories topic (docs/architecture.md, "Forgetting"). A redelivery
        writes the same fact again (same id) and erases nothing more."""
        if not applies_to_type(request, memory_type):
            return
        ids = memories_to_forget(request, known_memories.all_of(request.user_id))
        fact = memories_forgotten(request, memory_type, ids)
        send = partial(sent_to, memories, fact.key.encode(), encode(fact), partition)
        await through_outages(send, f"sending {fact.event_type} {fact.event_id}")
        known_memories.forget(request.user_id, ids)
        log.info("%s: forgot %d memories (%s request)", stage, len(ids), fact.scope)

    expiries_sent: set[str] = set()

    @app.timer(settings.expiry_check_interval.total_seconds())  # type: ignore[untyped-decorator]
    async def request_expiries() -> None:
        """Write a `MemoryExpired` command for each held memory that is due (once per worker
        and expiry while it is due; the command's id makes a repeat from another worker the same
        command)."""
        if app.rebalancing or app.tables.recovery.in_recovery:  # type: ignore[attr-defined]
            return
        try:
            due = due_expiries(known_memories.expiring(), memory_type, clock())
            expiries_sent.intersection_update(command.event_id for command in due)  # forgotten
            for command in due:
                if command.event_id in expiries_sent:
                    continue
                send = partial(sent_by_key, snapshots, command.key.encode(), encode(command))
                await through_outages(send, f"sending {command.event_type} {command.event_id}")
                expiries_sent.add(command.event_id)
        except Exception:  # the timer must survive whatever one scan ran into
            log.exception(
                "expiry scan failed; the next one runs in %s", settings.expiry_check_interval
            )

    @app.agent(snapshots, concurrency=1)
    async def extract_memories(stream: faust.StreamT[bytes]) -> None:
        applied = apply_or_dead_letter(apply, dead_letters, stage=stage, clock=clock)

        async for event in stream.events():  # interim: one record at a time
            for record in await guard.admitted([InputRecord.from_event(event)]):
                await applied(record)
                await progress_store.store({record.tp: record.offset})

    return app


def _readable_events(records: Sequence[InputRecord]) -> list[SnapshotsTopicEvent]:
    """The events of snapshots-topic `records`, poison left out (its stage dead-letters it)."""
    events: list[SnapshotsTopicEvent] = []
    for record in records:
        try:  # without keys: a look ahead is for forget requests, which are never sealed
            events.append(read_snapshots_record(record.key, record.value))
        except (InvalidRecord, NoKeyStore, KeyDestroyed):
            continue
    return events


def _redriven_key(redrive: Redrive) -> bytes:
    """The progress-table key marking a redrive as applied."""
    return f"redriven:{redrive.redrive_id}".encode()
