"""A memory type's stage: snapshots and direct saves in, one result record each out.

One stage (and consumer group) per memory type, always running: it extracts its kind of
knowledge from every snapshot when the type is enabled, and reconciles direct saves of its type
either way (docs/architecture.md, "Stages"). The agent only wires:

* **a snapshot** — skip it if this stage's result for it is already written (kept in
  `streams.own_decisions`, or projected) or if extraction of this type is disabled; otherwise ask
  the LLM (`extract`), embed what it found, reconcile it with the user's memories
  (`handlers.reconcile`), write one `SnapshotExtracted` record;
* **a save request** — skip a save whose result is written; embed, reconcile, write one
  `MemorySaved`;
* **a forget request** — write one `MemoriesForgotten` naming the memories it erases;
* **a rollback request** — write one `MemoryRolledBack` (`streams.rollbacks`);
* **a consolidation request** — write one `MemoriesConsolidated` (`streams.consolidations`).

Many records are in flight at once, one user's strictly in order (`streams.consuming`,
`streams.concurrency`): the LLM calls are bounded per worker (`streams.models.BoundedChat`),
the embedder batched. The user's memories are the read model's with this stage's own
unprojected records laid over them (`handlers.known_state`), so the stage keeps no history of
its own; what it knows of them, and its reconciliation, is `streams.stage_memories`. Every call
to the LLM, the embedder, MongoDB and the broker waits outages out (`streams.retrying`).
Results go to the memories-topic partition with the input's partition number (both topics are
keyed by user and have the same partition count).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import faust

from events.consolidations import MemoryConsolidationRequested
from events.forgetting import MemoryExpired, MemoryForgotten, SessionsForgotten, UserForgotten
from events.memories import MemoryType
from events.rollbacks import MemoryRollbackRequested
from events.saves import MemorySaveRequested
from events.snapshots import SnapshotExtracted, SnapshotPromoted
from handlers.dead_letters import Redrive, applies_to
from handlers.expiry import with_expiry
from handlers.extraction.base import ExtractionOutcome, Extractor, extract
from handlers.extraction.results import (
    extraction_record,
    result_id,
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
    forget_again,
    forgotten_fact_id,
    memories_forgotten,
    memories_to_forget,
)
from handlers.inputs import InvalidRecord, read_snapshots_record
from handlers.known_memory import KnownMemoryFacts
from handlers.known_state import OwnRecord
from handlers.ports import StageReadModel
from handlers.reconcile import NewMemory
from handlers.sealing import KeyDestroyed
from streams import metrics
from streams.app import faust_app, raw_table, raw_topic
from streams.budget import BudgetGate
from streams.consolidations import consolidate
from streams.consuming import ConcurrentRecords
from streams.dead_letters import dead_letter
from streams.expiry_timer import ExpiryTimer
from streams.faults import fault_point
from streams.forget_lookahead import forgotten_ahead
from streams.log_reader import KafkaLogReader
from streams.models import BoundedChat, MemoryModels
from streams.own_decisions import OwnDecisions
from streams.progress import TableProgress, guard_partitions
from streams.records import InputRecord
from streams.retrying import apply_or_dead_letter, through_outages
from streams.rollbacks import roll_back
from streams.sealing import NO_KEYS, StageKeys
from streams.sending import sent_to
from streams.settings import Clock, StreamSettings, utc_now
from streams.stage_memories import StageMemories

log = logging.getLogger(__name__)


class ExtractionStage:
    """One memory type's decisions wired to its topics, the read model and the models."""

    def __init__(
        self,
        app: faust.App,
        settings: StreamSettings,
        memory_type: MemoryType,
        extractor: Extractor | None,
        models: MemoryModels,
        read_model: StageReadModel,
        *,
        clock: Clock,
        keys: StageKeys,
        budget: BudgetGate | None = None,
    ) -> None:
        self.name = f"extract-{memory_type}"
        self.budget = budget
        self.settings = settings
        self.memory_type = memory_type
        self.extractor = extractor
        self.models = models
        self.read_model = read_model
        self.clock = clock
        self.keys = keys
        self.snapshots = raw_topic(app, settings.topics.snapshots, settings)
        self.memories = raw_topic(app, settings.topics.memories, settings)
        self.dead_letters = raw_topic(app, settings.topics.dead_letters, settings)
        self.progress = TableProgress(raw_table(app, "progress", settings))
        guard = guard_partitions(
            app,
            self.progress,
            bootstrap_servers=settings.bootstrap_servers,
            security=settings.security,
            stage=self.name,
            topics=[settings.topics.snapshots],
            group=settings.group(self.name),
        )
        self.records = ConcurrentRecords(guard, self.progress, settings.records_in_flight)
        self.log_reader = KafkaLogReader(settings.bootstrap_servers, security=settings.security)
        ring = keys.ring.in_threads() if keys.ring is not None else None
        self.own = OwnDecisions(
            self.log_reader, settings.topics.memories, memory_type, read_model, ring
        )
        self.llm = BoundedChat(
            models.llm, settings.llm_max_in_flight, memory_type=memory_type, name=models.llm_model
        )
        self.view = StageMemories(
            self.name, memory_type, settings, models, read_model, self.own, self.llm
        )
        self.applied = apply_or_dead_letter(
            self.apply, self.dead_letters, stage=self.name, clock=clock
        )

    # --- one record -----------------------------------------------------------------------

    async def apply(self, record: InputRecord) -> None:
        redrive = record.redrive
        if not applies_to(redrive, self.name):  # a redrive addressed to another stage
            return
        try:
            event = await self.keys.read(read_snapshots_record, record.key, record.value)
        except KeyDestroyed:  # its session, user or save was forgotten: nothing to learn
            log.info("%s: skipped a forgotten record at %s", self.name, record.position)
            return
        except InvalidRecord as exc:
            await self._dead_letter(record, str(exc))
            return
        if not self.settings.selection.takes(event):  # a shadow of some users only
            return
        await self.own.ready(record.partition)
        await self.own.refresh(record.partition)
        if isinstance(event, MemoryForgotten | SessionsForgotten | UserForgotten | MemoryExpired):
            await self.forget(event, record)
        elif isinstance(event, MemorySaveRequested):
            await self.save(event, record)
        elif isinstance(event, MemoryRollbackRequested):
            await self.roll_back(event, record)
        elif isinstance(event, MemoryConsolidationRequested):
            await self.consolidate(event, record)
        else:
            await self.extract(event, record, redrive)

    async def extract(
        self, snapshot: SnapshotPromoted, record: InputRecord, redrive: Redrive | None
    ) -> None:
        if self.extractor is None:
            return
        redrive_id = redrive.redrive_id if redrive else None
        event_id = result_id(snapshot.event_id, self.memory_type, redrive_id)
        if await self._written(event_id, snapshot.event_id, redrive is not None):
            await self._dead_letter_written_failure(record, event_id, snapshot.event_id)
            return
        if self.budget is not None:
            await self.budget.wait_within(snapshot.user_id, f"{self.name} of {snapshot.event_id}")
        with metrics.timed(metrics.EXTRACTION_SECONDS.labels(self.memory_type)):
            result = await self.extracted(self.extractor, snapshot, record, redrive)
            await self.write(record, result)
        if self.budget is not None:
            await self.budget.spend(snapshot.user_id, result.usage)
        if isinstance(result, SnapshotExtracted) and result.failure:
            reason = failure_reason(result.failure, result.event_id, sealed=self.keys.seal)
            await self._dead_letter(record, reason)
        log.info(
            "snapshot %s: %s (%s)",
            snapshot.event_id,
            [d.event_type for d in result.decisions],
            result.usage,
        )

    async def save(self, request: MemorySaveRequested, record: InputRecord) -> None:
        if request.memory_type != self.memory_type:
            return
        event_id = save_result_id(request.event_id, self.memory_type)
        if self.own.find(event_id) is not None or await self.view.read(
            self.read_model.save_projected, event_id
        ):
            return
        what = f"{self.name} of save {request.event_id}"
        (vector,) = await self.view.embedded([request.content.text])
        decisions, asked = await self.view.reconciled(
            [NewMemory(request.content, vector)],
            save_source(request),
            self.view.provenance(None),
            what,
        )
        retention = self.settings.retention.get(self.memory_type)
        decisions = with_expiry(decisions, retention=retention, requested=request.expires_at)
        result = save_record(request, decisions, usage_of(asked))
        await self.write(record, result)
        log.info("save %s: %s", request.event_id, [d.event_type for d in result.decisions])

    async def roll_back(self, request: MemoryRollbackRequested, record: InputRecord) -> None:
        result = await roll_back(
            request,
            memory_type=self.memory_type,
            own=self.own,
            read_model=self.read_model,
            read=self.view.read,
            known=self.view.known,
            provenance=self.view.provenance(None),
        )
        if result is not None:
            await self.write(record, result)

    async def consolidate(self, request: MemoryConsolidationRequested, record: InputRecord) -> None:
        result = await consolidate(
            request,
            memory_type=self.memory_type,
            enabled=self.extractor is not None,
            own=self.own,
            read_model=self.read_model,
            read=self.view.read,
            known=self.view.known,
            llm=self.llm,
            embedded=self.view.embedded,
            threshold=self.models.thresholds.cluster,
            adds_only=self.models.adds_only,
            attempts=self.settings.llm_attempts,
            max_answer_bytes=self.settings.extraction_limits.max_answer_bytes,
            provenance=self.view.provenance(None),
        )
        if result is not None:
            await self.write(record, result)
            if self.budget is not None:  # the user's daily tokens pay for it too
                await self.budget.spend(request.user_id, result.usage)

    async def forget(self, request: StageForgetInput, record: InputRecord) -> None:
        """Write the fact that erases what `request` forgets from the user's memories of this
        type (docs/architecture.md, "Forgetting"); a request read again after its fact was
        written erases only what became known again meanwhile (`forget_again`)."""
        if not applies_to_type(request, self.memory_type):
            return
        known: list[KnownMemoryFacts] = list((await self.view.known(request.user_id)).values())
        if isinstance(request, SessionsForgotten | UserForgotten):
            known = [*known, *await self.view.retired(request.user_id, known)]
        canonical = forgotten_fact_id(request, self.memory_type)
        fact = memories_forgotten(request, self.memory_type, memories_to_forget(request, known))
        if self.own.find(canonical) is not None or await self.view.read(
            self.read_model.forget_projected, fact.request_id, canonical
        ):
            again = forget_again(request, self.memory_type, known)
            if again is None or self.own.find(again.event_id) is not None:
                return
            fact = again
        await self.write(record, fact)
        log.info("%s: forgot %d memories (%s request)", self.name, len(fact.memory_ids), fact.scope)

    # --- the parts of a record ------------------------------------------------------------

    async def extracted(
        self,
        extractor: Extractor,
        snapshot: SnapshotPromoted,
        record: InputRecord,
        redrive: Redrive | None,
    ) -> SnapshotExtracted:
        """Ask the LLM and the embedder (waiting out their outages) and reconcile; anything
        else they raise about this snapshot is recorded as its extraction's failure. A snapshot
        whose session is forgotten further on in the log, before the LLM is asked or before the
        result is written, gets a result without decisions."""
        what = f"{self.name} of snapshot {snapshot.event_id}"
        unasked = ExtractionOutcome((), 0)
        if (request := await forgotten_ahead(self.log_reader, record, snapshot)) is not None:
            log.info("%s: not extracted, its session is forgotten (%s)", what, request)
            return extraction_record(snapshot, self.memory_type, unasked, [], usage_of([]))
        try:
            outcome = await through_outages(
                partial(
                    extract,
                    extractor,
                    snapshot,
                    self.llm,
                    attempts=self.settings.llm_attempts,
                    limits=self.settings.extraction_limits,
                ),
                what,
            )
            if outcome.attempts > 1:
                retries = metrics.LLM_RETRIES.labels(self.memory_type, self.models.llm_model)
                retries.inc(outcome.attempts - 1)
            vectors = await self.view.embedded([m.text for m in outcome.memories])
            news = [NewMemory(c, v) for c, v in zip(outcome.memories, vectors, strict=True)]
            stamp = self.view.provenance(extractor.prompt_version)
            decisions, asked = await self.view.reconciled(
                news, snapshot_source(snapshot), stamp, what
            )
            retention = self.settings.retention.get(self.memory_type)
            decisions = with_expiry(decisions, retention=retention)
        except Exception as exc:
            log.exception("%s failed", what)
            failed = ExtractionOutcome((), 0, failure=f"extraction failed: {exc!r}")
            outcome, decisions, asked = failed, [], []
        usage = usage_of([*outcome.answers, *asked])
        if (
            decisions
            and (request := await forgotten_ahead(self.log_reader, record, snapshot)) is not None
        ):
            log.info(
                "%s: decisions dropped, its session was forgotten meanwhile (%s)", what, request
            )
            outcome, decisions = unasked, []
        return extraction_record(
            snapshot,
            self.memory_type,
            outcome,
            decisions,
            usage,
            redrive_id=redrive.redrive_id if redrive else None,
        )

    async def write(self, record: InputRecord, result: OwnRecord) -> None:
        """Send the record to the memories-topic partition of the input's number, wait for the
        ack, and keep it as this stage's own until the projector has it."""
        value = await self.keys.encode(result)
        send = partial(sent_to, self.memories, result.key.encode(), value, record.partition)
        offset = await through_outages(send, f"sending {result.event_type} {result.event_id}")
        self.own.add(record.partition, offset, result)
        fault_point("extraction.after_result_sent")

    async def _written(self, event_id: str, snapshot_id: str, redriven: bool) -> bool:
        """Whether this stage's result `event_id` is written already (kept, or projected: a
        snapshot extracted before is not extracted again; a redrive is applied once)."""
        if self.own.find(event_id) is not None:
            log.warning("%s: adopting the result it wrote before (%s)", self.name, event_id)
            return True
        holder = await self.view.read(
            self.read_model.extraction_holder, snapshot_id, self.memory_type
        )
        return holder == event_id if redriven else holder is not None

    async def _dead_letter_written_failure(
        self, record: InputRecord, event_id: str, snapshot_id: str
    ) -> None:
        """A failed result is written before its dead letter: a worker killed in between leaves
        the snapshot read again with its result written and no dead letter. Its dead letter is
        sent again (its id derives from the record: the projector keeps the first)."""
        own = self.own.find(event_id)
        if isinstance(own, SnapshotExtracted):
            failure = own.failure
        else:
            read = self.read_model.extraction_failure
            failure = await self.view.read(read, snapshot_id, self.memory_type)
        if failure:
            reason = failure_reason(failure, event_id, sealed=self.keys.seal)
            await self._dead_letter(record, reason)

    async def _dead_letter(self, record: InputRecord, reason: str) -> None:
        await dead_letter(
            self.dead_letters, record, stage=self.name, reason=reason, clock=self.clock
        )


def create_extraction_app(
    settings: StreamSettings,
    memory_type: MemoryType,
    extractor: Extractor | None,
    models: MemoryModels,
    read_model: StageReadModel,
    *,
    clock: Clock = utc_now,
    keys: StageKeys = NO_KEYS,
    budget: BudgetGate | None = None,
) -> faust.App:
    """The stage of `memory_type`; without an `extractor` (the type is not enabled) it only
    reconciles direct saves and makes no LLM call for snapshots. With a `budget`, a user's
    snapshots wait while the user spent the day's LLM tokens (`streams.budget`)."""
    app = faust_app(f"extract-{memory_type}", settings)
    stage = ExtractionStage(
        app,
        settings,
        memory_type,
        extractor,
        models,
        read_model,
        clock=clock,
        keys=keys,
        budget=budget,
    )
    expiries = ExpiryTimer(memory_type, read_model, stage.snapshots, settings, clock)

    @app.task  # type: ignore[untyped-decorator]
    async def threads_for_records_in_flight() -> None:
        """Reads of the read model, key lookups and embeddings run in threads: the default
        pool (a few threads on a small machine) would queue the records in flight behind it."""
        workers = settings.records_in_flight + 4
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=workers))

    @app.on_before_shutdown.connect  # type: ignore[arg-type]
    async def drain_then_close(sender: faust.App, **_: Any) -> None:
        await stage.records.drain(settings.drain_seconds)
        await stage.log_reader.close()

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def stop_revoked(sender: faust.App, revoked: Any, **_: Any) -> None:
        await stage.records.on_revoked(app, revoked)
        stage.own.forget({tp.partition for tp in revoked})

    @app.timer(settings.expiry_check_interval.total_seconds())  # type: ignore[untyped-decorator]
    async def request_expiries() -> None:
        await expiries.run(app)

    @app.agent(stage.snapshots, concurrency=1)
    async def extract_memories(stream: faust.StreamT[bytes]) -> None:
        await stage.records.consume(stream, stage.applied)

    return app
