"""A whole pipeline for an integration test: stage processes, an SDK client, the read model."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pymongo import MongoClient
from pymongo.database import Database
from pymongo.errors import OperationFailure

from handlers.key_ring import StoreKeyRing
from memstream.config import Settings, load_settings
from memstream.keystore.sealing import data_key_store
from memstream.keystore.wrapping import new_master_key, write_master_keys
from memstream.runtime.pipeline import TANSU_ENVIRONMENT, Pipeline, pipeline_stages
from memstream.runtime.topics import ensure_topics
from streams.settings import utc_now
from tests.support.scripted_llm import ScriptedLLM

T = TypeVar("T")

TEST_WINDOW = {
    "MEMSTREAM_MAX_MESSAGES": "4",
    "MEMSTREAM_IDLE_TIMEOUT": "3",
    "MEMSTREAM_IDLE_CHECK_INTERVAL": "0.5",
}
TEST_EXTRACTION = {"MEMSTREAM_ENABLED_EXTRACTIONS": "semantic"}
TEST_PARTITIONS = {"MEMSTREAM_PARTITIONS": "4"}
"""Fewer partitions than the default (16): each costs every worker a start-up step per table
and per stage; a test of many workers per stage asks for more."""
"""Pipeline tests script semantic answers; a test of another type enables it explicitly."""
APACHE_ENVIRONMENT = {"MEMSTREAM_SESSION_TIMEOUT": "6", "MEMSTREAM_HEARTBEAT_INTERVAL": "1"}


def stage_needed(stage: str, settings: Settings) -> bool:
    """Is `stage` the window, the projector or the extraction of an enabled memory type?

    A test pipeline runs only those unless it asks for every stage: the extraction stage of a
    type that is not enabled only reconciles saved memories of its type and answers erasures
    of a session or a user (whose receipts wait for every type), and each idle worker costs a
    start and its polling (issue 25, part 7: the test time).
    """
    kind, _, memory_type = stage.partition(":")
    return kind != "extract" or memory_type in settings.memory.extraction.enabled


class PipelineHarness:
    """Stage workers started as child processes against a test broker, database and LLM."""

    def __init__(
        self,
        *,
        broker: Any,
        mongo_uri: str,
        llm: ScriptedLLM,
        run_id: str,
        log_dir: Path,
        environment: dict[str, str],
        every_stage: bool = False,
        config: str = "",
    ) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / "test-config.yaml").write_text(
            config or "# settings come from the environment\n", encoding="utf-8"
        )
        master_key = log_dir / "master.key"  # every pipeline's data keys are wrapped
        if not master_key.exists():
            write_master_keys(master_key, [new_master_key()])
        flavour_environment = TANSU_ENVIRONMENT if broker.flavour == "tansu" else APACHE_ENVIRONMENT
        self.environment = {
            "MEMSTREAM_CONFIG": str(log_dir / "test-config.yaml"),
            "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
            "MONGODB_URI": mongo_uri,
            "MONGODB_DATABASE": f"test_{run_id}",
            "MEMSTREAM_TOPIC_PREFIX": f"t{run_id}.",
            "MEMSTREAM_GROUP_PREFIX": f"g{run_id}-",
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "test",
            "MEMSTREAM_LLM_MODEL": llm.model,
            "MEMSTREAM_EMBEDDING_PROVIDER": "openai",
            "MEMSTREAM_EMBEDDING_MODEL": llm.embedding_model,
            "MEMSTREAM_MASTER_KEY_FILE": str(master_key),
            **flavour_environment,
            **TEST_PARTITIONS,
            **TEST_WINDOW,
            **TEST_EXTRACTION,
            **environment,
        }
        self.settings: Settings = load_settings(environ=self.environment)
        self.llm = llm
        self.log_dir = log_dir
        stages = pipeline_stages(self.settings)
        if not every_stage:
            stages = [stage for stage in stages if stage_needed(stage, self.settings)]
        self.pipeline = Pipeline(stages, self.environment, log_dir)
        self._mongo: MongoClient[dict[str, Any]] = MongoClient(
            self.environment["MONGODB_URI"], tz_aware=True
        )

    @property
    def db(self) -> Database[dict[str, Any]]:
        return self._mongo[self.settings.mongodb.database]

    def key_ring(self) -> StoreKeyRing:
        """The pipeline's data keys (on its database), looked up as needed: for reading the
        sealed log the way `memstream replay` does."""
        return StoreKeyRing(data_key_store(self.db, self.settings, utc_now), blocking=True)

    def start(self) -> PipelineHarness:
        asyncio.run(ensure_topics(self.settings.kafka))
        self.pipeline.start(timeout=180)
        return self

    def stop(self) -> None:
        self.pipeline.stop()
        self._mongo.close()

    def discard(self) -> None:
        """At a test's end: SIGKILL every worker (its topics, groups and database are never
        used again, so a clean shutdown would only cost seconds per test; clean stops and
        kills are tested where they matter)."""
        for process in self.pipeline.processes.values():
            process.kill()
        self._mongo.close()

    def record(self, user_id: str, session_id: str, messages: list[dict[str, Any]]) -> None:
        asyncio.run(self._record(user_id, session_id, messages))

    def flush(self, user_id: str, session_id: str) -> None:
        asyncio.run(self._flush(user_id, session_id))

    def save(self, user_id: str, memory_type: str, text: str, **options: Any) -> str:
        """`MemoryClient.save(...)`: a direct save; returns its id."""
        from memstream.sdk.client import MemoryClient

        async def send() -> str:
            async with MemoryClient(self.settings) as client:
                return await client.save(user_id, memory_type, text, **options)

        return asyncio.run(send())

    async def _record(self, user_id: str, session_id: str, messages: list[dict[str, Any]]) -> None:
        from memstream.sdk.client import MemoryClient

        async with MemoryClient(self.settings) as client:
            await client.record(user_id, session_id, messages)

    async def _flush(self, user_id: str, session_id: str) -> None:
        from memstream.sdk.client import MemoryClient

        async with MemoryClient(self.settings) as client:
            await client.flush(user_id, session_id)

    def snapshots(self, **query: Any) -> list[dict[str, Any]]:
        return list(self.db["snapshots"].find(query).sort([("session_id", 1), ("seq", 1)]))

    def memories(self, **query: Any) -> list[dict[str, Any]]:
        return list(self.db["memories"].find(query).sort("text", 1))

    def log_tails(self) -> str:
        return "\n".join(
            f"--- {stage}\n{process.log_tail(40)}"
            for stage, process in self.pipeline.processes.items()
        )


def eventually(
    probe: Callable[[], T], check: Callable[[T], bool], *, timeout: float = 60.0, what: str = ""
) -> T:
    """Poll `probe()` until `check` accepts its value; fail with the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except OperationFailure:  # SecantusDB (beta) answers "internal error" under load
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
            continue
        if check(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}: {value!r}")
        time.sleep(0.2)


async def read_topic(bootstrap_servers: str, topic: str, partitions: int) -> list[Any]:
    """Every record of `topic`, partition by partition, in log order (read until quiet: Tansu's
    end offsets can be short after multi-record batches)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        records: dict[int, list[Any]] = {p: [] for p in range(partitions)}
        while True:
            batches = await consumer.getmany(timeout_ms=1000)
            for tp, fetched in batches.items():
                records[tp.partition].extend(fetched)
            if not batches and all([await consumer.position(tp) >= ends[tp] for tp in tps]):
                return [record for p in range(partitions) for record in records[p]]
    finally:
        await consumer.stop()


async def produce_raw(
    bootstrap_servers: str, topic: str, records: list[tuple[bytes | None, bytes, int | None]]
) -> None:
    """Produce `(key, value, partition)` records one at a time, in order, as any client would."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, acks="all")
    await producer.start()
    try:
        for key, value, partition in records:
            await producer.send_and_wait(topic, value, key=key, partition=partition)
    finally:
        await producer.stop()


def copy_turns(source: PipelineHarness, target: PipelineHarness) -> int:
    """Copy the source pipeline's whole turns topic into the target's (same partitions, same
    order, same bytes), creating the target's topics first, and its data keys with the master
    key that wraps them (the turns are sealed with them: a log, its key store and its master
    key go together). Returns the number of records."""
    kafka = source.settings.kafka

    async def copy() -> int:
        await ensure_topics(target.settings.kafka)
        records = await read_topic(
            kafka.bootstrap_servers or "", kafka.topics.turns, kafka.partitions
        )
        await produce_raw(
            target.settings.kafka.bootstrap_servers or "",
            target.settings.kafka.topics.turns,
            [(r.key, r.value, r.partition) for r in records],
        )
        return len(records)

    keys = list(source.db["data_keys"].find())
    if keys:
        target.db["data_keys"].insert_many(keys)
    master_key = Path(source.environment["MEMSTREAM_MASTER_KEY_FILE"])
    Path(target.environment["MEMSTREAM_MASTER_KEY_FILE"]).write_bytes(master_key.read_bytes())
    return asyncio.run(copy())
