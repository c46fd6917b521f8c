"""Restart cost against history: each stage's restart time and RSS with a history of H, then 10H
(`python -m bench scale`, figure 3 of issue 22). This module: the window, and the mechanics the
extraction stage's and the projector's measurements share (`bench.scale_memory_history`).

A stage's history is what it has seen before the restart: closed sessions for the window,
memories for an extraction stage (semantic) and for the projector. It is built once, growing:
H, measure, grow to 10H, measure again, with the same workers and topics, so the two
measurements differ only by the history. Records go straight into the stages' input topics
(`bench.scale_workload`: the real event models and codec) and the real stages work through them;
nothing is written to a stage's state but by the stage itself. The window's history (its own
topics): `closed_session`s, one turn recorded 30 days ago and its flush each.

**A restart** (`restarted`): the worker is stopped (SIGTERM) and started again; `READY_DELAY`
after its ready marker a small fresh workload is written to its input, and the clock runs from
the start until the fresh workload's output is seen (for the window: the snapshots of
`FRESH_SESSIONS` sessions recorded through the SDK, on the snapshots topic). Faust prints the
marker once the stage's tables are recovered (`on_rebalance_complete`, sent after "Restore
complete"), just before it seeks its input to the committed offsets: the fresh workload is
written after that seek because records that are already waiting when a worker starts can be
fetched during it and dropped unapplied, and at the quiet end of a partition nothing applies
them until another record arrives (`bench.scale_stages.stalled`; seen in 2 of 4 restarts at
1,000 memories before this order). A restart that does not catch up within `CATCH_UP_TIMEOUT`
still counts, with that time, and is marked `stalled`. RSS (the worker's process) is sampled
throughout and once more `SETTLE` seconds after it caught up: the figure is that last sample.
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

from bench.core import median
from bench.kafka_probe import Arrival, TopicTail, wait_ready
from bench.rss import RssSampler, tree_rss
from bench.scale_stages import (
    Stalled,
    prepare_database,
    scale_environment,
    wait_drained,
)
from bench.scale_workload import (
    closed_session,
    conversation,
    keyed,
    produce,
    token_for,
    user_id,
    utc_now,
)
from memstream.config import Settings, load_settings
from memstream.runtime.pipeline import StageProcess
from memstream.runtime.topics import ensure_topics
from memstream.sdk.client import MemoryClient

FRESH_SESSIONS = 20
"""The window's fresh workload: sessions of three turns and a flush, through the SDK."""
READY_DELAY = 2.0
"""Seconds after a restarted worker's ready marker before its fresh workload is written."""
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
    write_fresh: Callable[[], Awaitable[None]],
    caught_up: Callable[[], Awaitable[float]],
    *,
    history: int,
    fresh: int,
    records: int,
) -> Restart:
    """Start `worker`, call `write_fresh()` `READY_DELAY` after its ready marker, and wait for
    `caught_up()` (the `time.perf_counter()` at which the fresh workload's output was seen, or
    `TimeoutError` after `CATCH_UP_TIMEOUT`); its restart figures."""
    launched = time.perf_counter()
    process = worker.start()
    assert process.pid is not None
    stalled = 0
    with RssSampler({"worker": process.pid}, interval=0.25) as sampler:
        ready = await wait_ready(process, START_TIMEOUT)
        await asyncio.sleep(READY_DELAY)
        await write_fresh()
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


async def restarted_watching(
    worker: Worker,
    settings: Settings,
    topic: str,
    write_fresh: Callable[[], Awaitable[None]],
    done: Callable[[list[Arrival]], bool],
    what: str,
    *,
    history: int,
    fresh: int,
    records: int,
) -> Restart:
    """`restarted`, caught up when `done(arrivals)` first holds for what arrives on `topic`
    after the restart began."""
    kafka = settings.kafka
    tail = TopicTail(kafka.bootstrap_servers or "", topic, kafka.partitions, from_end=True)
    await tail.start()
    try:
        caught_up = partial(tail.wait_until, done, timeout=CATCH_UP_TIMEOUT, what=what)
        return await restarted(
            worker, write_fresh, caught_up, history=history, fresh=fresh, records=records
        )
    finally:
        await tail.stop()


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


def fresh_sessions(salt: str) -> set[tuple[str, str]]:
    return {(user_id(salt, i), "fresh") for i in range(FRESH_SESSIONS)}


async def record_sessions(settings: Settings, sessions: set[tuple[str, str]]) -> None:
    """Three turns and a flush per session, through the SDK."""
    async with MemoryClient(settings) as client:
        for user, session in sorted(sessions):
            await client.record(user, session, conversation(token_for(user, session))[:3])
            await client.flush(user, session)


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
    sessions = fresh_sessions(salt)
    return await restarted_watching(
        worker,
        settings,
        settings.kafka.topics.snapshots,
        partial(record_sessions, settings, sessions),
        SnapshotsOf(sessions),
        "the window's fresh snapshots",
        history=size,
        fresh=len(sessions),
        records=int(drained["records"]),
    )
