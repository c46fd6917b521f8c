"""Running one stage of the pipeline as a Faust worker in this process."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import faust
from pymongo.database import Database

from handlers.extraction.base import ExtractionLimits
from handlers.key_ring import StoreKeyRing
from handlers.selection import Selection
from handlers.topic_shift import TopicShiftPolicy
from handlers.window import WindowPolicy
from memstream.config import Settings, extractor_identity
from memstream.keystore.sealing import data_key_store
from memstream.runtime.orphaning import exit_when_orphaned
from streams.sealing import StageKeys
from streams.settings import Clock, StreamSettings, utc_now

if TYPE_CHECKING:  # the window and the projector never load the extraction stages' modules
    from streams.budget import BudgetGate

log = logging.getLogger(__name__)

READY_MARKER = "memstream-stage-ready"


def stream_settings(settings: Settings) -> StreamSettings:
    """The stream apps' view of the configuration (the broker must be known by now)."""
    kafka = settings.kafka
    if not kafka.bootstrap_servers:
        raise ValueError("KAFKA_BOOTSTRAP_SERVERS is not set (memstream up sets it for workers)")
    return StreamSettings(
        bootstrap_servers=kafka.bootstrap_servers,
        topics=kafka.topics,
        partitions=kafka.partitions,
        replication_factor=kafka.replication_factor,
        group_prefix=kafka.group_prefix,
        window=WindowPolicy(
            max_messages=settings.window.max_messages,
            idle_timeout=timedelta(seconds=settings.window.idle_timeout_seconds),
            max_snapshot_bytes=settings.window.max_snapshot_bytes,
            max_tokens=settings.window.max_tokens,
            topic_shift=topic_shift_policy(settings),
            max_turn_chars=settings.limits.max_turn_chars,
            dedup_horizon=timedelta(seconds=settings.window.dedup_horizon_seconds),
            sealed=settings.memory.seal_content,
        ),
        idle_check_interval=timedelta(seconds=settings.window.idle_check_interval_seconds),
        session_timeout_seconds=kafka.session_timeout_seconds,
        heartbeat_interval_seconds=kafka.heartbeat_interval_seconds,
        producer_max_batch_size=kafka.producer_max_batch_size,
        producer_request_timeout_seconds=kafka.producer_request_timeout_seconds,
        llm_attempts=settings.llm.max_attempts,
        llm_max_in_flight=settings.llm.max_in_flight,
        extraction_limits=ExtractionLimits(
            max_memories=settings.limits.max_memories_per_extraction,
            max_answer_bytes=settings.limits.max_llm_answer_bytes,
            turns_per_call=settings.limits.extraction_turns_per_call,
        ),
        retention={
            name: timedelta(seconds=seconds)
            for name, seconds in settings.memory.retention_seconds.items()
        },
        expiry_check_interval=timedelta(seconds=settings.memory.expiry_check_interval_seconds),
        security=kafka.security,
        drain_seconds=settings.operations.drain_seconds,
        selection=Selection(
            users=frozenset(settings.memory.extraction.only_users),
            since=settings.memory.extraction.since,
        ),
    )


def topic_shift_policy(settings: Settings) -> TopicShiftPolicy | None:
    """The window's topic-shift trigger, when a threshold is set."""
    threshold = settings.window.topic_shift_threshold
    if threshold is None:
        return None
    return TopicShiftPolicy(threshold, settings.window.topic_shift_min_turns)


CLOCK_OFFSET_VARIABLE = "MEMSTREAM_CLOCK_OFFSET_SECONDS"
"""Shifts a worker's wall clock by this many seconds. For replay tests: no decision of the
pipeline may depend on the wall clock, so a replay with a shifted clock must give the same
snapshots and memories (the clock only triggers idle commands and stamps dead letters)."""


def worker_clock(environ: Mapping[str, str]) -> Clock:
    """The wall clock, shifted by `MEMSTREAM_CLOCK_OFFSET_SECONDS` when that is set."""
    offset = float(environ.get(CLOCK_OFFSET_VARIABLE) or 0)
    if not offset:
        return utc_now
    shift = timedelta(seconds=offset)
    return lambda: utc_now() + shift


def build_stage(settings: Settings, stage: str) -> faust.App:
    """The Faust app of one stage: `window`, `projector` or `extract:<memory type>`."""
    streams = stream_settings(settings)
    clock = worker_clock(os.environ)
    # Each stage imports only its own app (and the extractors only the LLM client): a worker
    # that restarts is back sooner (docs/architecture.md, "Operations").
    if stage == "window":
        from streams.window import create_window_app

        topic_embedder = None
        if settings.window.topic_shift_threshold is not None:
            from memstream.providers.clients import embedder

            topic_embedder = embedder(settings.embedding, settings.llm)
        return create_window_app(streams, clock, stage_keys(settings, clock), topic_embedder)
    if stage == "projector":
        from streams.projector import create_projector_app

        if not settings.mongodb.uri:
            raise ValueError("MONGODB_URI is not set (memstream up sets it for workers)")
        db = _database(settings)
        data_keys = data_key_store(_database(settings, keys=True), settings, clock)
        return create_projector_app(streams, db, data_keys, clock)
    kind, _, memory_type = stage.partition(":")
    if kind == "extract" and memory_type in settings.memory.types:
        from handlers.extraction.registry import extractor_for
        from handlers.reconcile import Thresholds
        from memstream.providers.clients import chat_model, embedder
        from projections.known_memories import StageReadModel
        from streams.extraction import create_extraction_app
        from streams.models import MemoryModels

        reconcile = settings.memory.reconcile
        identity = extractor_identity(settings)
        declared = settings.memory.custom_types.get(memory_type)
        models = MemoryModels(
            llm=chat_model(settings.llm),
            llm_model=settings.llm.model or "",
            embedder=embedder(settings.embedding, settings.llm),
            thresholds=Thresholds(
                reinforce=reconcile.reinforce_threshold,
                ask=reconcile.ask_threshold,
                max_options=reconcile.max_options,
                consolidate=reconcile.consolidate_threshold,
            ),
            questions_per_call=reconcile.questions_per_call,
            extractor=identity.name,
            extractor_digest=identity.digest,
            adds_only=declared is not None and not declared.reconcile,
        )
        enabled = memory_type in settings.memory.extraction.enabled
        extractor = extractor_for(memory_type, settings.memory.custom_types) if enabled else None
        if not settings.mongodb.uri:
            raise ValueError("MONGODB_URI is not set (memstream up sets it for workers)")
        keys = stage_keys(settings, clock)
        read_model = StageReadModel(_database(settings), settings.kafka.topics.memories)
        return create_extraction_app(
            streams,
            memory_type,
            extractor,
            models,
            read_model,
            clock=clock,
            keys=keys,
            budget=_budget(settings, memory_type, clock),
        )
    known = ["window", "projector", *(f"extract:{kind}" for kind in settings.memory.types)]
    raise ValueError(f"unknown stage {stage!r}; expected one of {', '.join(known)}")


def _budget(settings: Settings, memory_type: str, clock: Clock) -> BudgetGate | None:
    """The users' daily LLM token budget, when one is set."""
    budget = settings.llm.daily_token_budget
    if budget is None:
        return None
    from projections.llm_budget import LlmBudgetStore
    from streams.budget import BudgetGate

    return BudgetGate(
        LlmBudgetStore(_database(settings)),
        budget,
        memory_type=memory_type,
        clock=clock,
        check_every=timedelta(seconds=settings.llm.budget_check_seconds),
    )


def _database(settings: Settings, *, keys: bool = False) -> Database[dict[str, Any]]:
    """The read model's database, or with `keys` the data keys' (often the same one)."""
    from pymongo import MongoClient

    # A bounded socket timeout turns a hung operation into a retried NetworkTimeout.
    client: MongoClient[dict[str, Any]] = MongoClient(
        settings.mongodb.uri, tz_aware=True, socketTimeoutMS=30_000
    )
    mongodb = settings.mongodb
    return client[mongodb.keys_database_name if keys else mongodb.database]


def stage_keys(settings: Settings, clock: Clock) -> StageKeys:
    """The window's or an extraction stage's keys: the key store on the configured database
    (sealed input is opened whatever `memory.seal_content` says), sealing its output when that
    is on. Without MONGODB_URI there is no key store: sealing must then be off."""
    if not settings.mongodb.uri:
        if settings.memory.seal_content:
            raise ValueError(
                "MEMSTREAM_SEAL_CONTENT needs MONGODB_URI: the data keys live in MongoDB "
                "(memstream up sets it for workers; or set MEMSTREAM_SEAL_CONTENT=false)"
            )
        return StageKeys()
    store = data_key_store(_database(settings, keys=True), settings, clock)
    return StageKeys(StoreKeyRing(store), seal=settings.memory.seal_content)


def with_topics(settings: Settings) -> Settings:
    """Create the pipeline's topics if they are missing (a worker may be the first to start, on
    any machine), and take the partition count they have (`memstream.runtime.topics`)."""
    import asyncio

    from memstream.runtime.topics import ensure_topics, topic_partitions

    partitions = topic_partitions(settings.kafka, asyncio.run(ensure_topics(settings.kafka)))
    if partitions == settings.kafka.partitions:
        return settings
    kafka = settings.kafka.model_copy(update={"partitions": partitions})
    return settings.model_copy(update={"kafka": kafka})


def run_stage(settings: Settings, stage: str, loglevel: str = "info") -> None:
    """Run one stage until SIGTERM/SIGINT; prints a ready marker once partitions are assigned.
    A broker that refuses this worker's settings (credentials, certificate) ends it with
    `KafkaAccessError`; one that cannot be reached yet is waited for. The projector first
    refuses a read model holding memories of a type no longer declared
    (`memstream.runtime.declared_types`)."""
    import asyncio

    from streams.kafka_security import wait_for_broker

    kafka = settings.kafka
    if kafka.bootstrap_servers:
        asyncio.run(wait_for_broker(kafka.bootstrap_servers, kafka.security, log=log))
    if stage == "projector" and settings.mongodb.uri:
        from memstream.runtime.declared_types import refuse_undeclared_types

        asyncio.run(refuse_undeclared_types(_database(settings), settings))
    app = build_stage(with_topics(settings), stage)
    watch(app, settings, stage)
    announced = False

    @app.on_rebalance_complete.connect  # type: ignore[arg-type]
    async def announce_ready(sender: faust.App, **_: Any) -> None:
        nonlocal announced
        if not announced:
            announced = True
            print(f"{READY_MARKER} {stage}", file=sys.stderr, flush=True)

    logging.basicConfig(
        level=logging.WARNING,
        format=f"%(asctime)s {stage} %(levelname)s %(name)s: %(message)s",
        force=True,  # the CLI configured logging already
    )
    for ours in ("events", "handlers", "streams", "projections", "memstream"):
        logging.getLogger(ours).setLevel(loglevel.upper())
    if os.environ.get(EXIT_WITH_PARENT_VARIABLE):
        # Faust's shutdown waits for a group coordinator, for minutes when the broker died too
        exit_when_orphaned(name="memstream worker")
    worker = faust.Worker(app, loglevel=loglevel, override_logging=False, quiet=True)
    worker.execute_from_commandline()


METRICS_MARKER = "memstream-metrics"
"""What a worker prints, with its stage and address, once it serves `/metrics`."""


def watch(app: faust.App, settings: Settings, stage: str) -> None:
    """Health for the probes, and the metrics server when a port is set
    (`memstream.runtime.observability`)."""
    from memstream.runtime.observability import Health, serve_probes, watch_app

    health = Health()
    watch_app(app, health, stage)
    operations = settings.operations
    if operations.metrics_port is not None:
        server = serve_probes(health, operations.metrics_port, operations.metrics_host)
        address = f"http://{operations.metrics_host}:{server.server_port}"
        print(f"{METRICS_MARKER} {stage} {address}", file=sys.stderr, flush=True)


EXIT_WITH_PARENT_VARIABLE = "MEMSTREAM_EXIT_WITH_PARENT"
"""Set by `memstream up` for its workers: they must not outlive it. Only `up`'s workers watch
for it (:func:`memstream.runtime.orphaning.exit_when_orphaned`): a worker an operator started
from a shell with `nohup` is meant to outlive the shell."""
