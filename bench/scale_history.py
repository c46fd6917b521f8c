"""Restart cost against history: each stage's restart time and RSS with a history of H, then 10H
(`python -m bench scale`, figure 3 of issue 22).

A stage's history is what it has seen before the restart: closed sessions for the window,
memories for an extraction stage (semantic) and for the projector. It is built once, growing:
H, measure, grow to 10H, measure again, with the same workers and topics, so the two
measurements differ only by the history. Records go straight into the stages' input topics
(`bench.scale_workload`: the real event models and codec) and the real stages work through them;
nothing is written to a stage's state but by the stage itself.

* **window** (its own topics): `closed_session`s — one turn recorded 30 days ago and its flush.
* **extract:semantic and the projector** (topics of their own, only semantic enabled): history
  snapshots written to the turns and snapshots topics; the stub LLM (no delay) answers each with
  `FACTS` facts, so the extraction stage ADDs them (`FACTS` memories per user: the history grows
  by users, as on a platform with many) and the projector writes them to MongoDB.

**A restart**: the worker is stopped (SIGTERM), a small fresh workload is written to its input
(`FRESH_SESSIONS` sessions through the SDK for the window; `FRESH_SNAPSHOTS` snapshots of as
many existing users for the extraction stage), the worker is started again, and the clock runs
from its start until the fresh workload's output is seen: its snapshots on the snapshots topic
(window), its results on the memories topic (extraction), its results in MongoDB (projector,
started after the extraction stage's restart, so its fresh input is the extraction stage's
fresh output plus the fresh turns and snapshots). `ready_seconds` is when it printed its ready
marker (first partition assignment). RSS (the worker's process) is sampled throughout and
once more `SETTLE` seconds after it caught up: the figure is that last sample.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import orjson
from pymongo import MongoClient
from pymongo.database import Database

from bench.core import median
from bench.kafka_probe import Arrival, TopicTail, wait_ready
from bench.rss import RssSampler, tree_rss
from bench.scale_stages import (
    ResultWatch,
    Stalled,
    prepare_database,
    scale_environment,
    wait_drained,
)
from bench.scale_workload import (
    closed_session,
    conversation,
    history_snapshot,
    history_snapshots,
    keyed,
    produce,
    token_for,
    user_id,
    utc_now,
)
from bench.stub_llm import StubLLMServer
from memstream.client import MemoryClient
from memstream.config import Settings, load_settings
from memstream.runtime import StageProcess
from memstream.topics import ensure_topics
from projections.store import SNAPSHOTS

FACTS = 20
"""Memories per history snapshot (and per user)."""
FRESH_SESSIONS = 20
"""The window's fresh workload: sessions of three turns and a flush, through the SDK."""
FRESH_SNAPSHOTS = 10
"""The extraction stage's fresh workload: snapshots of as many existing users (fewer if the
smallest history has fewer users), answered with `FRESH_FACTS` fact each, so that the restart
time is mostly the restart, not the work."""
FRESH_FACTS = 1
SETTLE = 1.0
START_TIMEOUT = 300.0
CATCH_UP_TIMEOUT = 180.0
"""A restarted worker that has not caught up by then has stalled (`bench.scale_stages.stalled`):
the restart counts with this time (a lower bound) and is marked `stalled`."""
STALL_SECONDS = 60.0
"""While a history is built: no progress for this long is a stall, and the worker is
restarted (at most `STALL_RESTARTS` times; they are counted in the raw figures)."""
STALL_RESTARTS = 3
PARTITIONS = 8
NO_LLM = "http://127.0.0.1:9/v1"
"""The window makes no LLM call."""


@dataclass
class Restart:
    """One stage's restart at one history size."""

    stage: str
    history: int
    ready_seconds: float
    caught_up_seconds: float
    rss_mb: float
    peak_rss_mb: float
    fresh: int
    input_records: int
    """Records in the stage's input topics at the restart (history plus the fresh workload)."""
    stalled: int = 0
    """Restarts (of those this figure stands for) that had not caught up after
    `CATCH_UP_TIMEOUT`: counted with that time."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class History:
    """A stage history's restarts, and the stalls met while building it."""

    restarts: list[Restart]
    stalls: list[str]


def growth(restarts: Sequence[Restart], stage: str) -> tuple[Restart, Restart]:
    """`stage`'s restart at the smallest and at the largest history: each figure the median of
    that size's restarts."""
    sizes = sorted({r.history for r in restarts if r.stage == stage})
    if len(sizes) < 2:
        raise ValueError(f"{stage}: restarts at {len(sizes)} history sizes, need two")
    return median_restart(restarts, stage, sizes[0]), median_restart(restarts, stage, sizes[-1])


def median_restart(restarts: Sequence[Restart], stage: str, history: int) -> Restart:
    found = [r for r in restarts if r.stage == stage and r.history == history]
    if not found:
        raise ValueError(f"no restart of {stage} at {history}")
    return Restart(
        stage,
        history,
        median([r.ready_seconds for r in found]),
        median([r.caught_up_seconds for r in found]),
        median([r.rss_mb for r in found]),
        max(r.peak_rss_mb for r in found),
        found[0].fresh,
        max(r.input_records for r in found),
        sum(r.stalled for r in found),
    )


def drain_history(
    settings: Settings, worker: Worker, *, timeout: float, stalls: list[str]
) -> dict[str, Any]:
    """Wait until `worker`'s stage has applied its whole input, restarting it when it stalls
    (noted in `stalls`)."""
    while True:
        try:
            return asyncio.run(
                wait_drained(
                    settings, worker.stage, timeout=timeout, worker=worker.process,
                    stall=STALL_SECONDS,
                )
            )  # fmt: skip
        except Stalled as stall:
            stalls.append(str(stall))
            print(f"   {stall}: restarting it", file=sys.stderr, flush=True)
            if len(stalls) > STALL_RESTARTS:
                raise
            worker.stop()
            asyncio.run(wait_ready(worker.start(), START_TIMEOUT))


class Worker:
    """One stage's worker, restartable; each start logs to a file of its own."""

    def __init__(self, stage: str, environment: dict[str, str], log_dir: Path) -> None:
        self.stage = stage
        self.environment = environment
        self.log_dir = log_dir
        self.starts = 0
        self.process: StageProcess | None = None

    def start(self) -> StageProcess:
        self.starts += 1
        name = f"worker-{self.stage.replace(':', '-')}-{self.starts}.log"
        self.process = StageProcess(self.stage, self.environment, self.log_dir, log_name=name)
        return self.process.start()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


async def restarted(
    worker: Worker,
    caught_up: Callable[[], Awaitable[float]],
    *,
    history: int,
    fresh: int,
    records: int,
) -> Restart:
    """Start `worker` and wait for `caught_up()` (the `time.perf_counter()` at which the fresh
    workload's output was seen, or `TimeoutError` after `CATCH_UP_TIMEOUT`); its restart
    figures."""
    launched = time.perf_counter()
    process = worker.start()
    assert process.pid is not None
    stalled = 0
    with RssSampler({"worker": process.pid}, interval=0.25) as sampler:
        ready = await wait_ready(process, START_TIMEOUT)
        try:
            done = await caught_up()
        except TimeoutError as error:
            print(f"   {worker.stage} stalled: {error}", file=sys.stderr, flush=True)
            done, stalled = time.perf_counter(), 1
        await asyncio.sleep(SETTLE)
    rss = tree_rss(process.pid) or 0.0
    return Restart(
        worker.stage,
        history,
        ready - launched,
        done - launched,
        rss,
        max(sampler.samples["worker"], default=rss),
        fresh,
        records,
        stalled,
    )


def seen_on(tail: TopicTail, done: Callable[[list[Arrival]], bool], what: str) -> Any:
    """`caught_up` for `restarted`: when `done(arrivals)` first held."""
    return partial(tail.wait_until, done, timeout=CATCH_UP_TIMEOUT, what=what)


def print_restart(kind: str, restart: Restart) -> None:
    print(
        f"   history {kind} {restart.stage} at {restart.history:,}: ready "
        f"{restart.ready_seconds:.1f} s, caught up {restart.caught_up_seconds:.1f} s, "
        f"{restart.rss_mb:.0f} MB",
        file=sys.stderr,
        flush=True,
    )


# ---- the window ---------------------------------------------------------------------------------


class SnapshotsOf:
    """`done` for a tail of the snapshots topic: a snapshot of every one of `sessions`."""

    def __init__(self, sessions: set[tuple[str, str]]) -> None:
        self.sessions = sessions
        self.seen: set[tuple[str, str]] = set()
        self._read = 0

    def __call__(self, arrivals: list[Arrival]) -> bool:
        for arrival in arrivals[self._read :]:
            data = orjson.loads(arrival.record.value or b"{}")
            key = (str(data.get("user_id")), str(data.get("session_id")))
            if data.get("event_type") == "SnapshotPromoted" and key in self.sessions:
                self.seen.add(key)
        self._read = len(arrivals)
        return self.seen >= self.sessions


async def fresh_sessions(settings: Settings, salt: str) -> set[tuple[str, str]]:
    sessions = {(user_id(salt, i), "fresh") for i in range(FRESH_SESSIONS)}
    async with MemoryClient(settings) as client:
        for user, session in sorted(sessions):
            await client.record(user, session, conversation(token_for(salt, user))[:3])
            await client.flush(user, session)
    return sessions


def window_history(
    kind: str,
    *,
    bootstrap: str,
    mongo_uri: str,
    workdir: Path,
    sizes: Sequence[int],
    repeats: int = 1,
) -> History:
    """The window's restarts (`repeats` at each size of `sizes`, closed sessions)."""
    config = workdir / "bench-config.yaml"
    workdir.mkdir(parents=True, exist_ok=True)
    config.write_text("# settings come from the environment\n")
    environment = scale_environment(
        kind, bootstrap=bootstrap, mongo_uri=mongo_uri, llm_url=NO_LLM, config=config,
        partitions=PARTITIONS, max_in_flight=1, name="scale-w",
    )  # fmt: skip
    settings = load_settings(environ=environment)
    kafka = settings.kafka
    asyncio.run(ensure_topics(kafka))
    prepare_database(settings)
    worker = Worker("window", environment, workdir / "logs")
    asyncio.run(wait_ready(worker.start(), START_TIMEOUT))
    restarts: list[Restart] = []
    stalls: list[str] = []
    built = 0
    now = utc_now()
    try:
        for index, size in enumerate(sizes):
            started = time.monotonic()
            events = [
                event
                for number in range(built, size)
                for event in closed_session(user_id("closed", number // 10), f"c{number}", now)
            ]
            asyncio.run(
                produce(
                    kafka.bootstrap_servers or "", kafka.topics.turns, keyed(events),
                    max_batch_size=kafka.producer_max_batch_size,
                )
            )  # fmt: skip
            drained = drain_history(settings, worker, timeout=120 + size / 5, stalls=stalls)
            built = size
            print(
                f"   history {kind} window: {size:,} closed sessions in "
                f"{time.monotonic() - started:.0f} s",
                file=sys.stderr,
                flush=True,
            )
            for attempt in range(repeats):
                worker.stop()
                salt = f"fresh{index}-{attempt}"
                restarts.append(asyncio.run(window_restart(worker, settings, size, salt, drained)))
                print_restart(kind, restarts[-1])
    finally:
        worker.stop()
    return History(restarts, stalls)


async def window_restart(
    worker: Worker, settings: Settings, size: int, salt: str, drained: dict[str, Any]
) -> Restart:
    kafka = settings.kafka
    tail = await TopicTail(
        kafka.bootstrap_servers or "", kafka.topics.snapshots, kafka.partitions, from_end=True
    ).start()
    try:
        sessions = await fresh_sessions(settings, salt)
        caught_up = seen_on(tail, SnapshotsOf(sessions), "the window's fresh snapshots")
        return await restarted(
            worker, caught_up, history=size, fresh=len(sessions), records=int(drained["records"])
        )
    finally:
        await tail.stop()


# ---- the extraction stage and the projector -----------------------------------------------------


def memory_history(
    kind: str,
    *,
    bootstrap: str,
    mongo_uri: str,
    workdir: Path,
    sizes: Sequence[int],
    repeats: int = 1,
) -> History:
    """extract:semantic's and the projector's restarts (`repeats` at each size of `sizes`,
    memories)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "bench-config.yaml"
    config.write_text("# settings come from the environment\n")
    with StubLLMServer(workdir / "llm", chat_delay=0.0, facts=FACTS) as llm:
        environment = scale_environment(
            kind, bootstrap=bootstrap, mongo_uri=mongo_uri, llm_url=llm.base_url,
            config=config, partitions=PARTITIONS, max_in_flight=1, enabled=("semantic",),
            name="scale-m",
        )  # fmt: skip
        settings = load_settings(environ=environment)
        asyncio.run(ensure_topics(settings.kafka))
        prepare_database(settings)
        log_dir = workdir / "logs"
        stages = {s: Worker(s, environment, log_dir) for s in ("extract:semantic", "projector")}
        for worker in stages.values():
            asyncio.run(wait_ready(worker.start(), START_TIMEOUT))
        client: MongoClient[dict[str, Any]] = MongoClient(
            mongo_uri, tz_aware=True, socketTimeoutMS=30_000
        )
        restarts: list[Restart] = []
        stalls: list[str] = []
        fresh = min(FRESH_SNAPSHOTS, max(1, sizes[0] // FACTS))
        try:
            users = 0
            for index, size in enumerate(sizes):
                started = time.monotonic()
                wanted = max(1, size // FACTS)
                history = history_snapshots("hist", range(users, wanted), 1, utc_now())
                users = wanted
                asyncio.run(write_snapshots(settings, history))
                drained = {
                    stage: drain_history(settings, worker, timeout=120 + size / 2, stalls=stalls)
                    for stage, worker in stages.items()
                }
                print(
                    f"   history {kind}: {users * FACTS:,} memories in "
                    f"{time.monotonic() - started:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
                llm.configure(facts=FRESH_FACTS)
                for attempt in range(repeats):
                    for worker in stages.values():
                        worker.stop()
                    found = asyncio.run(
                        memory_restarts(
                            stages, settings, client, users * FACTS,
                            index * repeats + attempt, users, fresh, drained,
                        )
                    )  # fmt: skip
                    restarts.extend(found)
                    for restart in found:
                        print_restart(kind, restart)
                llm.configure(facts=FACTS)
        finally:
            for worker in stages.values():
                worker.stop()
            client.close()
    return History(restarts, stalls)


async def write_snapshots(settings: Settings, history: Sequence[Any]) -> None:
    kafka = settings.kafka
    bootstrap = kafka.bootstrap_servers or ""
    batch = kafka.producer_max_batch_size
    turns = keyed([turn for item in history for turn in item.turns])
    await produce(bootstrap, kafka.topics.turns, turns, max_batch_size=batch)
    snapshots = keyed([item.snapshot for item in history])
    await produce(bootstrap, kafka.topics.snapshots, snapshots, max_batch_size=batch)


def fresh_users(users: int, count: int, offset: int) -> list[int]:
    """`count` existing user indexes spread evenly over `users`, shifted by `offset` so that
    another measurement picks others."""
    step = max(1, users // count)
    return sorted({(j * step + offset) % users for j in range(min(count, users))})


async def memory_restarts(
    stages: dict[str, Worker],
    settings: Settings,
    client: MongoClient[dict[str, Any]],
    size: int,
    index: int,
    users: int,
    count: int,
    drained: dict[str, dict[str, Any]],
) -> list[Restart]:
    """Restart the extraction stage on a fresh workload, then the projector on what that
    added."""
    kafka = settings.kafka
    now = utc_now()
    fresh = [
        history_snapshot(user_id("hist", n), f"fresh{index}", token_for("hist", n, index), now)
        for n in fresh_users(users, count, index)
    ]
    tail = await TopicTail(
        kafka.bootstrap_servers or "", kafka.topics.memories, kafka.partitions, from_end=True
    ).start()
    try:
        await write_snapshots(settings, fresh)
        watch = ResultWatch(frozenset(item.snapshot.user_id for item in fresh), ("semantic",))
        extraction = await restarted(
            stages["extract:semantic"],
            seen_on(tail, watch, "the extraction stage's fresh results"),
            history=size,
            fresh=len(fresh),
            records=int(drained["extract:semantic"]["records"]) + len(fresh),
        )
    finally:
        await tail.stop()
    db = client[settings.mongodb.database]
    ids = [item.snapshot.event_id for item in fresh]
    projector = await restarted(
        stages["projector"],
        partial(extracted_in_database, db, ids),
        history=size,
        fresh=len(fresh),
        records=int(drained["projector"]["records"]) + 3 * len(fresh),
    )
    return [extraction, projector]


async def extracted_in_database(db: Database[dict[str, Any]], snapshot_ids: list[str]) -> float:
    """Poll until every snapshot of `snapshot_ids` has its semantic extraction in the read
    model; when that was first seen."""
    deadline = time.monotonic() + CATCH_UP_TIMEOUT
    query = {"_id": {"$in": snapshot_ids}, "extractions.semantic": {"$exists": True}}
    while time.monotonic() < deadline:
        found = await asyncio.to_thread(db[SNAPSHOTS].count_documents, query)
        if found >= len(snapshot_ids):
            return time.perf_counter()
        await asyncio.sleep(0.05)
    raise TimeoutError(f"the projector did not project {len(snapshot_ids)} fresh results")
