"""Stage workers for the scale benchmarks, as `memstream up` runs them, and watching them work.

Every worker is `python -m memstream worker --stage S` (`memstream.runtime.pipeline.StageProcess`)
with
the environment `memstream up` gives workers on that broker (`TANSU_ENVIRONMENT` /
`KAFKA_ENVIRONMENT`), pointed at the stub LLM (`bench.stub_llm`), its own topic prefix,
consumer groups and database, and `MEMSTREAM_LLM_MAX_IN_FLIGHT` (the LLM calls one worker
process keeps in flight: ignored by stages that keep one).

A stage is *drained* when its consumer group has committed its input topics to their ends
(`bench.stage_drain.LagProbe`; two quiet samples in a row). Results are seen on the memories
topic (`ResultWatch`): their event type, ids and usage are plain JSON even when their content is
sealed, so no key is needed to tell which snapshot and type a result is for.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.kafka_probe import Arrival
from bench.stage_drain import LagProbe, Sample, drained
from events.memories import MEMORY_TYPES
from memstream.config import Settings
from memstream.runtime.pipeline import KAFKA_ENVIRONMENT, TANSU_ENVIRONMENT, StageProcess

MAX_IN_FLIGHT_VARIABLE = "MEMSTREAM_LLM_MAX_IN_FLIGHT"


def scale_environment(
    kind: str,
    *,
    bootstrap: str,
    mongo_uri: str,
    llm_url: str,
    config: Path,
    partitions: int,
    max_in_flight: int,
    enabled: Collection[str] = MEMORY_TYPES,
    name: str = "scale",
) -> dict[str, str]:
    """What the workers and the benchmark's clients are told: fresh topics, groups and database
    (`name` and a random run id), the stub LLM for chat and embeddings, no idle promotion."""
    run = uuid.uuid4().hex[:8]
    return {
        "MEMSTREAM_CONFIG": str(config),
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "MONGODB_URI": mongo_uri,
        "MONGODB_DATABASE": f"bench_{name}_{run}",
        "MEMSTREAM_TOPIC_PREFIX": f"bench-{name}-{run}.",
        "MEMSTREAM_GROUP_PREFIX": f"bench-{name}-{run}-",
        "MEMSTREAM_PARTITIONS": str(partitions),
        "OPENAI_BASE_URL": llm_url,
        "OPENAI_API_KEY": "bench",
        "MEMSTREAM_LLM_MODEL": "stub-llm",
        "MEMSTREAM_EMBEDDING_PROVIDER": "openai",
        "MEMSTREAM_EMBEDDING_MODEL": "stub-embedding",
        "MEMSTREAM_ENABLED_EXTRACTIONS": ",".join(enabled),
        MAX_IN_FLIGHT_VARIABLE: str(max_in_flight),
        # Only flushes (and full windows) promote: no session idles during a measurement.
        "MEMSTREAM_IDLE_TIMEOUT": "86400",
        **(TANSU_ENVIRONMENT if kind == "tansu" else KAFKA_ENVIRONMENT),
    }


def prepare_database(settings: Settings) -> None:
    """Create the read model's and the key store's indexes before any worker starts (each
    worker creates them too, idempotently). SecantusDB 0.7.0b3 was seen to hang for minutes, every
    request timing out, when a projector and an extraction stage created them at once on a
    fresh database (one thread stuck in `create_collection`, the others waiting behind it)."""
    from pymongo import MongoClient

    from memstream.keystore.mongo import MongoDataKeys
    from projections import ensure_indexes
    from streams.settings import utc_now

    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongodb.uri, tz_aware=True)
    try:
        db = client[settings.mongodb.database]
        ensure_indexes(db)
        MongoDataKeys(db, clock=utc_now).prepare()
    finally:
        client.close()


def stage_group(settings: Settings, stage: str) -> str:
    """The consumer group of a stage (`streams.settings.StreamSettings.group`)."""
    return settings.kafka.group_prefix + stage.replace(":", "-")


def stage_inputs(settings: Settings, stage: str) -> list[str]:
    topics = settings.kafka.topics
    if stage == "window":
        return [topics.turns]
    if stage.startswith("extract:"):
        return [topics.snapshots]
    return [topics.turns, topics.snapshots, topics.memories, topics.dead_letters]


class Stalled(TimeoutError):
    """A stage's lag stayed the same, above zero, for longer than it takes to commit."""


def stalled(samples: Sequence[Sample], seconds: float) -> bool:
    """The last samples show the same lag (above zero) and the same input for `seconds`: the
    stage applies nothing although records wait (a worker commits every 2.8 s while it works).
    Seen after restarts before `streams.progress` re-read quiet tails: records at the quiet end
    of a partition that Faust fetched but never handed to the agent, applied only when the
    partition got another record. Kept so that a stall is reported, never waited on forever."""
    if not samples or samples[-1].lag == 0:
        return False
    last = samples[-1]
    for sample in reversed(samples):
        if (sample.lag, sample.end) != (last.lag, last.end):
            return False
        if last.seconds - sample.seconds >= seconds:
            return True
    return False


async def wait_drained(
    settings: Settings,
    stage: str,
    *,
    timeout: float,
    worker: StageProcess | None = None,
    stall: float | None = None,
    interval: float = 0.5,
) -> dict[str, Any]:
    """Wait until `stage`'s group has committed all of its input; seconds waited and records.
    With `worker` (the stage's process), fail as soon as it exits, with its log's tail; with
    `stall`, raise `Stalled` once the lag has not moved for that many seconds."""
    kafka = settings.kafka
    probe = LagProbe(
        kafka.bootstrap_servers or "",
        stage_group(settings, stage),
        stage_inputs(settings, stage),
        kafka.partitions,
    )
    started = time.monotonic()
    samples: list[Sample] = []
    async with probe:
        while True:
            lag, end = await probe.sample()
            samples.append(Sample(time.monotonic() - started, lag, end))
            if drained(samples):
                return {"seconds": samples[-2].seconds, "records": end}
            if stall is not None and stalled(samples, stall):
                raise Stalled(f"{stage} applied nothing for {stall:.0f} s with {lag} of {end} left")
            exited = worker is not None and not worker.running
            if exited or samples[-1].seconds > timeout:
                state = "exited" if exited else f"still lags {lag} of {end} records"
                tail = f":\n{worker.log_tail(40)}" if worker is not None else ""
                raise TimeoutError(f"{stage} {state} after {samples[-1].seconds:.0f} s{tail}")
            await asyncio.sleep(interval)


@dataclass(frozen=True)
class ResultSeen:
    """A result record on the memories topic, as much of it as can be read without keys."""

    event_type: str
    user_id: str
    memory_type: str
    source_id: str
    """The snapshot's id (`SnapshotExtracted`) or the save's (`MemorySaved`)."""
    calls: int
    seen_at: float


def result_seen(value: bytes | None, seen_at: float) -> ResultSeen | None:
    """The plain fields of a `SnapshotExtracted` or `MemorySaved` record (None for any other
    record, or one that is not JSON)."""
    try:
        data = orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    event_type = data.get("event_type")
    if event_type not in ("SnapshotExtracted", "MemorySaved"):
        return None
    usage = data.get("usage") or {}
    return ResultSeen(
        event_type=str(event_type),
        user_id=str(data.get("user_id")),
        memory_type=str(data.get("memory_type")),
        source_id=str(data.get("snapshot_id") or data.get("save_id") or ""),
        calls=int(usage.get("calls") or 0) if isinstance(usage, dict) else 0,
        seen_at=seen_at,
    )


@dataclass
class ResultWatch:
    """Counts the results for a set of users, per memory type, as a `TopicTail` delivers them;
    done once every user has `per_user` results of every expected type.

    Use as the `done` callable of `TopicTail.wait_until`: each call reads only the arrivals it
    has not seen yet."""

    users: frozenset[str]
    types: tuple[str, ...]
    per_user: int = 1
    seen: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    calls: int = 0
    last_at: float | None = None
    _read: int = 0

    @property
    def expected(self) -> int:
        return len(self.users) * len(self.types) * self.per_user

    @property
    def found(self) -> int:
        return sum(len(sources) for sources in self.seen.values())

    def feed(self, results: Iterable[ResultSeen]) -> None:
        for result in results:
            if result.user_id not in self.users or result.memory_type not in self.types:
                continue
            sources = self.seen.setdefault((result.user_id, result.memory_type), set())
            if result.source_id in sources:
                continue  # a re-sent result (same id): counted once
            sources.add(result.source_id)
            self.calls += result.calls
            self.last_at = result.seen_at

    def complete(self) -> bool:
        return self.found >= self.expected

    def missing(self) -> dict[str, int]:
        """Per memory type, how many users have fewer results than expected."""
        return {
            memory_type: sum(
                1 for u in self.users if len(self.seen.get((u, memory_type), ())) < self.per_user
            )
            for memory_type in self.types
        }

    def __call__(self, arrivals: list[Arrival]) -> bool:
        fresh = arrivals[self._read :]
        self._read = len(arrivals)
        self.feed(
            seen
            for arrival in fresh
            if (seen := result_seen(arrival.record.value, arrival.seen_at)) is not None
        )
        return self.complete()
