"""One fault run: produce a workload (and malformed records) while a seeded schedule of faults
plays, wait until the pipeline settles, and judge the result with the oracle.

The workload's records go to the turns topic as any producer would send them: each turn an
encoded `TurnRecorded` under its session key, a flush after a flushed session's last turn.
A send that fails (the broker restarting) is sent again: the window drops a turn it has seen.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from pymongo.errors import PyMongoError

from events.codec import encode
from events.snapshots import SnapshotExtracted
from events.turns import SessionFlushRequested, TurnRecorded
from tests.support.fault.faults import Fault, Target, start_worker
from tests.support.fault.llm import WorkloadLLM
from tests.support.fault.malformed import Malformed
from tests.support.fault.oracle import Observed, Verdict, judge
from tests.support.fault.workload import Session, Turn, Workload, reconcile_environment
from tests.support.pipeline import PipelineHarness, read_topic
from tests.support.scripted_llm import ScriptedLLM

log = logging.getLogger(__name__)

Record = tuple[bytes | None, bytes | None]
"""(key, value) to produce; a value of None stands for "the next turn of this session"."""


@dataclass
class Outcome:
    verdict: Verdict
    seconds: float
    faults: list[dict[str, Any]]
    crashes: list[str]
    observed: Observed
    produced: int
    resent: int
    afterwards: Any = None
    """What `run_faults`' `afterwards` returned (run on the settled pipeline, before it stops)."""

    def summary(self) -> dict[str, Any]:
        kills = [f for f in self.faults if f["fault"] == "kill"]
        outages = [f for f in self.faults if f["fault"] == "outage"]
        return {
            "kills_survived": len(kills),
            "outages_survived": len(outages),
            "unplanned_worker_crashes": len(self.crashes),
            "records_produced": self.produced,
            "records_resent": self.resent,
            "snapshots": len(self.observed.snapshots),
            "memories": len(self.observed.memories),
            "dead_letters": len(self.observed.dead_letters),
            "lost_items": len(self.verdict.lost),
            "duplicated_items": len(self.verdict.duplicated),
            "wrong_items": len(self.verdict.wrong),
            "seconds": round(self.seconds, 1),
        }


@dataclass
class FaultRun:
    target: Target
    workload: Workload
    malformed: list[Malformed] = field(default_factory=list)
    produce_seconds: float = 30.0
    """How long production is spread over (faults play meanwhile)."""

    def __post_init__(self) -> None:
        self.produced = 0
        self.resent = 0
        self.crashes: list[str] = []
        self._producer_error: BaseException | None = None

    # -- the run ------------------------------------------------------------------------------

    def execute(self, schedule: Sequence[tuple[float, Fault]], *, settle_timeout: float) -> Outcome:
        """Produce while the faults play at their times (seconds after the start, in order),
        then wait for the pipeline to settle and judge it."""
        started = time.monotonic()
        producer = threading.Thread(target=self._produce, name="fault-run-producer", daemon=True)
        producer.start()
        for at, fault in sorted(schedule, key=lambda item: item[0]):
            while time.monotonic() - started < at:
                self.watch()
                time.sleep(0.2)
            fault(self.target)
            self.watch()
        while producer.is_alive():
            self.watch()
            producer.join(0.5)
        if self._producer_error is not None:
            raise self._producer_error
        observed = self.settle(settle_timeout)
        topic = self.target.harness.settings.kafka.topics.turns
        verdict = judge(
            self.workload,
            self.malformed,
            observed,
            turns_topic=topic,
            memory_type=self.target.memory_type,
        )
        return Outcome(
            verdict,
            time.monotonic() - started,
            self.target.log,
            self.crashes,
            observed,
            self.produced,
            self.resent,
        )

    def watch(self) -> None:
        """Restart a stage that crashed on its own (what `memstream up`'s supervisor does)."""
        pipeline = self.target.harness.pipeline
        for stage, process in pipeline.processes.items():
            if stage in self.target.retired or process.running:
                continue
            self.crashes.append(f"{stage} exited with {process.returncode}")
            log.warning("%s exited with %s; restarting it", stage, process.returncode)
            process.start()
        for extra in self.target.extra_workers:
            if not extra.running:
                name = extra.log_path.name
                self.crashes.append(f"{extra.stage} worker {name} exited with {extra.returncode}")
                extra.start()

    # -- production ---------------------------------------------------------------------------

    def records(self) -> list[tuple[bytes | None, Any]]:
        """The records in production order: sessions interleaved (each in its own order, a
        flush after a flushed session's last turn), malformed records scattered among them.
        A turn or flush is encoded when it is first sent (its times are the sending time)."""
        rng = self.target.rng
        sessions = list(self.workload.sessions)
        pending = [list(session.turns) for session in sessions]
        waiting = list(range(len(sessions)))
        rng.shuffle(waiting)
        active: list[int] = []
        order: list[tuple[bytes | None, Any]] = []
        while waiting or active:
            while waiting and len(active) < 8:
                active.append(waiting.pop())
            index = rng.choice(active)
            session = sessions[index]
            turn = pending[index].pop(0)
            order.append((session.key, partial(_turn_event, session, turn)))
            if not pending[index]:
                active.remove(index)
                if session.flushed:
                    order.append((session.key, partial(_flush_event, session, turn)))
        for record in self.malformed:
            order.insert(rng.randint(0, len(order)), (record.key, record.value))
        return order

    def _produce(self) -> None:
        try:
            asyncio.run(self._send_all())
        except BaseException as exc:  # surfaced by execute()
            self._producer_error = exc

    async def _send_all(self) -> None:
        from aiokafka import AIOKafkaProducer
        from aiokafka.errors import KafkaError

        kafka = self.target.harness.settings.kafka
        topic = kafka.topics.turns
        records = self.records()
        pause = self.produce_seconds / max(1, len(records))
        producer: AIOKafkaProducer | None = None
        for key, payload in records:
            value: bytes = payload if isinstance(payload, bytes) else payload()
            while True:
                try:
                    if producer is None:
                        producer = AIOKafkaProducer(
                            bootstrap_servers=kafka.bootstrap_servers, acks="all",
                            request_timeout_ms=10_000,
                        )  # fmt: skip
                        await producer.start()
                    await producer.send_and_wait(topic, value, key=key)
                    break
                except (KafkaError, OSError) as exc:
                    log.warning("producing failed (%r); sending it again", exc)
                    self.resent += 1
                    if producer is not None:
                        await _stopped(producer)
                        producer = None
                    await asyncio.sleep(1.0)
            self.produced += 1
            await asyncio.sleep(pause)
        if producer is not None:
            await producer.stop()

    # -- settling -----------------------------------------------------------------------------

    def settle(self, timeout: float) -> Observed:
        """Wait until every turn is in a snapshot, every snapshot extracted and every malformed
        record dead-lettered, then a while longer (a late duplicate would show), and observe."""
        deadline = time.monotonic() + timeout
        turns = self.workload.turn_count
        last: Observed | None = None
        while time.monotonic() < deadline:
            self.watch()
            try:
                last = self.observe(with_log=False)
            except PyMongoError:
                time.sleep(1)
                continue
            users = set(self.workload.users)
            mine = [s for s in last.snapshots if s.get("user_id") in users]
            held = sum(len(s.get("turn_ids") or []) for s in mine)
            memory_type = self.target.memory_type
            extracted = all(memory_type in (s.get("extractions") or {}) for s in mine)
            if held >= turns and extracted and len(last.dead_letters) >= len(self.malformed):
                time.sleep(5)
                self.watch()
                return self.observe(with_log=True)
            time.sleep(1)
        log.warning("the pipeline did not settle in %.0fs", timeout)
        return self.observe(with_log=True)

    def observe(self, *, with_log: bool) -> Observed:
        harness = self.target.harness
        return observe(harness.db, harness.settings.kafka if with_log else None, harness)


def observe(db: Any, kafka: Any, harness: PipelineHarness) -> Observed:
    """What a read model holds, and (given the Kafka settings whose memories topic to read)
    every extraction result record in the log, opened with the harness's data keys."""
    observed = Observed(
        snapshots=list(db["snapshots"].find()),
        turns=list(db["turns"].find({}, {"snapshot_id": 1, "user_id": 1})),
        memories=list(db["memories"].find({}, {"embedding": 0, "evidence": 0})),
        memory_events=list(db["memory_events"].find({}, {"event": 0})),
        dead_letters=list(db["dead_letters"].find()),
    )
    if kafka is not None:
        observed.results = asyncio.run(_results(kafka, harness))
    return observed


async def _results(kafka: Any, harness: PipelineHarness) -> list[tuple[str, bytes]]:
    from events.codec import decode
    from handlers.sealed_events import opener

    records = await read_topic(
        kafka.bootstrap_servers or "", kafka.topics.memories, kafka.partitions
    )
    results: list[tuple[str, bytes]] = []
    for record in records:
        if record.value and b'"SnapshotExtracted"' in record.value:
            event = decode(record.value, opener(harness.key_ring()))
            if isinstance(event, SnapshotExtracted):
                results.append((event.event_id, record.value))
    return results


def _turn_event(session: Session, turn: Turn) -> bytes:
    now = datetime.now(UTC)
    return encode(
        TurnRecorded(
            event_id=turn.turn_id,
            occurred_at=now,
            recorded_at=now,
            user_id=session.user_id,
            session_id=session.session_id,
            role=turn.role,  # type: ignore[arg-type]
            content=turn.content,
        )
    )


def _flush_event(session: Session, last: Turn) -> bytes:
    return encode(
        SessionFlushRequested(
            event_id=f"flush-{last.turn_id}",
            occurred_at=datetime.now(UTC),
            user_id=session.user_id,
            session_id=session.session_id,
        )
    )


async def _stopped(producer: Any) -> None:
    try:
        await asyncio.wait_for(producer.stop(), 10)
    except Exception:  # a producer whose broker went away may fail to stop cleanly
        log.debug("stopping a failed producer", exc_info=True)


def spread(
    rng: random.Random, faults: Sequence[Fault], seconds: float
) -> list[tuple[float, Fault]]:
    """A seeded schedule: `faults` in their order at random moments of the first `seconds`."""
    moments = sorted(rng.uniform(0.05, 0.95) * seconds for _ in faults)
    return list(zip(moments, faults, strict=True))


def run_faults(
    *,
    broker: Any,
    mongo_uri: str,
    log_dir: Path,
    seed: int,
    workload: Workload,
    malformed: list[Malformed],
    faults: Sequence[Fault],
    produce_seconds: float,
    settle_timeout: float,
    database: Any = None,
    own_broker: bool = False,
    workers_per_stage: int = 1,
    memory_type: str = "semantic",
    config: str = "",
    afterwards: Callable[[Target, Outcome], Any] | None = None,
) -> Outcome:
    """Start a pipeline (fresh topics, groups and database) with a scripted LLM answering for
    `workload` and `workers_per_stage` workers of each busy stage, play `faults` at seeded
    moments while producing, judge the end state. The run extracts `memory_type` only (a
    custom type is declared in `config`, the project configuration)."""
    rng = random.Random(seed)
    with ScriptedLLM() as llm:
        answers = WorkloadLLM(workload, memory_type)
        answers.install(llm)
        run = uuid.uuid4().hex[:10]
        harness = PipelineHarness(
            broker=broker,
            mongo_uri=mongo_uri,
            llm=llm,
            run_id=run,
            log_dir=log_dir / f"logs-{run}",
            environment={
                **reconcile_environment(),
                "MEMSTREAM_ENABLED_EXTRACTIONS": memory_type,
            },
            config=config,
        ).start()
        target = Target(
            harness,
            llm,
            answers,
            rng,
            database=database,
            broker=broker if own_broker else None,
            memory_type=memory_type,
        )
        try:
            for stage in target.busy_stages:
                for _ in range(workers_per_stage - 1):
                    start_worker(target, stage)
            schedule = spread(rng, faults, produce_seconds)
            outcome = FaultRun(target, workload, malformed, produce_seconds).execute(
                schedule, settle_timeout=settle_timeout
            )
            if afterwards is not None:
                outcome.afterwards = afterwards(target, outcome)
            return outcome
        finally:
            for extra in target.extra_workers:
                extra.stop()
            harness.stop()
