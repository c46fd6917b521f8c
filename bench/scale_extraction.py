"""Extraction under load: the pipeline against a bare client making the same LLM calls, and two
workers per memory type against one (`python -m bench scale`, figures 1 and 2 of issue 22).

One pipeline per broker, as `memstream up` runs it (window, one stage per memory type, all four
enabled, projector: `memstream.runtime.pipeline.Pipeline`), on `PARTITIONS` partitions, every
worker told
`MEMSTREAM_LLM_MAX_IN_FLIGHT` (each memory type's worker keeps that many calls in flight), against
the stub LLM (`bench.stub_llm`: every answer after exactly 1 s, any number at once). A *round*:

1. N users each record one short session through the SDK (`bench.scale_workload.conversation`:
   four turns every memory type finds worth asking about); the window and the projector drain
   them (their groups' commits reach the ends of their inputs), so the clock starts on an idle
   pipeline;
2. the stub's counters are reset and every user flushes their session at once (the SDK's
   `flush`); the clock runs from the first flush until a client reading the memories topic has
   seen a result (`SnapshotExtracted`) for every snapshot and every enabled type;
3. the projector drains what the round wrote (outside the timing), so that
4. the **bare client** (`bare_client`) runs on a quiet machine: the very request bodies the
   pipeline sent to the stub in step 2 (chat and embeddings: the calls it actually made, which
   skip any snapshot a type finds not worth asking about), sent again with aiohttp through an
   `asyncio.Semaphore` of the pipeline's total in-flight limit: extraction worker processes times
   `MEMSTREAM_LLM_MAX_IN_FLIGHT`.

**Two workers per type**: a second `memstream worker --stage extract:<type>` per type joins each
type's consumer group (the groups rebalance; each worker then owns half the partitions), and a
round with as many fresh users runs again; its rate against the one-worker round's.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.kafka_probe import TopicTail
from bench.scale_stages import ResultWatch, prepare_database, scale_environment, wait_drained
from bench.scale_workload import conversation, token_for, user_id
from bench.stub_llm import StubLLMServer, calls_made, subjects
from memstream.config import Settings, load_settings
from memstream.runtime.pipeline import Pipeline, StageProcess, pipeline_stages
from memstream.runtime.topics import ensure_topics
from memstream.sdk.client import MemoryClient

PARTITIONS = 8
"""Partitions of every topic (the default is 4): two workers per type own four each."""
MAX_IN_FLIGHT = 8
"""`MEMSTREAM_LLM_MAX_IN_FLIGHT` for every worker: with one worker per type, 4 x 8 = 32 calls in
flight at most (the issue's bare client)."""
LLM_SECONDS = 1.0
"""The stub's answer time for every chat request."""
START_TIMEOUT = 300.0


@dataclass
class ExtractionPipeline:
    """A started pipeline on one broker, its stub LLM, and any second extraction workers."""

    kind: str
    settings: Settings
    environment: dict[str, str]
    pipeline: Pipeline
    llm: StubLLMServer
    log_dir: Path
    max_in_flight: int
    second: dict[str, StageProcess] = field(default_factory=dict)

    @property
    def extraction_stages(self) -> list[str]:
        return [s for s in self.pipeline.processes if s.startswith("extract:")]

    @property
    def enabled(self) -> tuple[str, ...]:
        return tuple(self.settings.memory.extraction.enabled)

    @property
    def extraction_workers(self) -> int:
        """Worker processes of the enabled types' stages."""
        per_type = 2 if self.second else 1
        return per_type * len(self.enabled)

    @property
    def in_flight_limit(self) -> int:
        """The pipeline's total LLM in-flight limit: the bare client's semaphore."""
        return in_flight_limit(self.extraction_workers, self.max_in_flight)

    def add_second_workers(self, timeout: float = START_TIMEOUT) -> float:
        """Start a second worker for every extraction stage; seconds until all are ready (each
        prints its ready marker once the rebalance gave it partitions)."""
        started = time.monotonic()
        for stage in self.extraction_stages:
            name = f"worker-{stage.replace(':', '-')}-2.log"
            self.second[stage] = StageProcess(
                stage, self.environment, self.log_dir, log_name=name
            ).start()
        deadline = started + timeout
        while not all(worker.is_ready() for worker in self.second.values()):
            for worker in self.second.values():
                if not worker.running:
                    raise RuntimeError(f"second {worker.stage} worker exited:\n{worker.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError("second extraction workers not ready in time")
            time.sleep(0.2)
        return time.monotonic() - started

    def stop(self) -> None:
        for worker in self.second.values():
            worker.terminate()
        for worker in self.second.values():
            worker.stop()
        self.pipeline.stop()


def in_flight_limit(workers: int, max_in_flight: int) -> int:
    """The total in-flight limit of `workers` processes keeping `max_in_flight` calls each."""
    if workers < 1 or max_in_flight < 1:
        raise ValueError(f"no calls in flight with {workers} workers x {max_in_flight}")
    return workers * max_in_flight


@contextlib.contextmanager
def extraction_pipeline(
    kind: str,
    *,
    bootstrap: str,
    mongo_uri: str,
    workdir: Path,
    partitions: int = PARTITIONS,
    max_in_flight: int = MAX_IN_FLIGHT,
) -> Iterator[ExtractionPipeline]:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "bench-config.yaml"
    config.write_text("# settings come from the environment\n")
    with StubLLMServer(workdir / "llm", chat_delay=LLM_SECONDS) as llm:
        environment = scale_environment(
            kind,
            bootstrap=bootstrap,
            mongo_uri=mongo_uri,
            llm_url=llm.base_url,
            config=config,
            partitions=partitions,
            max_in_flight=max_in_flight,
            name="scale-x",
        )
        settings = load_settings(environ=environment)
        asyncio.run(ensure_topics(settings.kafka))
        prepare_database(settings)
        log_dir = workdir / "logs"
        pipeline = Pipeline(pipeline_stages(settings), environment, log_dir)
        print(f"   starting the pipeline on {kind} …", file=sys.stderr, flush=True)
        started = time.monotonic()
        pipeline.start(timeout=START_TIMEOUT)
        print(f"   ready in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        running = ExtractionPipeline(
            kind, settings, environment, pipeline, llm, log_dir, max_in_flight
        )
        try:
            yield running
        finally:
            running.stop()


# ---- a round ------------------------------------------------------------------------------------


async def record_sessions(settings: Settings, sessions: Sequence[tuple[str, str, str]]) -> None:
    async with MemoryClient(settings) as client:
        await asyncio.gather(
            *(
                client.record(user, session, conversation(token))
                for user, session, token in sessions
            )
        )


async def flush_and_wait(
    settings: Settings,
    sessions: Sequence[tuple[str, str, str]],
    types: Sequence[str],
    timeout: float,
) -> tuple[float, ResultWatch, bool]:
    """Flush every session at once; seconds from the first flush until a result of every type
    for every session's snapshot was seen on the memories topic, the results seen, and whether
    the round stalled (not every result after `timeout` seconds: it then counts as `timeout`)."""
    kafka = settings.kafka
    watch = ResultWatch(frozenset(user for user, _, _ in sessions), tuple(types))
    tail = await TopicTail(
        kafka.bootstrap_servers or "", kafka.topics.memories, kafka.partitions
    ).start()
    try:
        async with MemoryClient(settings) as client:
            started = time.perf_counter()
            await asyncio.gather(*(client.flush(user, session) for user, session, _ in sessions))
            try:
                await tail.wait_until(watch, timeout=timeout, what="a result for every snapshot")
            except TimeoutError:
                return timeout, watch, True
    finally:
        await tail.stop()
    assert watch.last_at is not None
    return watch.last_at - started, watch, False


def pipeline_round(running: ExtractionPipeline, users: int, salt: str) -> dict[str, Any]:
    """One round of `users` sessions through the pipeline (see the module doc); then the bare
    client over the same calls."""
    settings = running.settings
    sessions = [(user_id(salt, i), "s0", token_for(salt, i)) for i in range(users)]
    timeout = 120 + 4 * users * LLM_SECONDS
    asyncio.run(record_sessions(settings, sessions))
    processes = running.pipeline.processes
    before = {
        stage: asyncio.run(wait_drained(settings, stage, timeout=timeout, worker=processes[stage]))
        for stage in ("window", "projector")
    }
    running.llm.reset()
    seconds, watch, stalled = asyncio.run(
        flush_and_wait(settings, sessions, running.enabled, timeout)
    )
    stats = running.llm.stats()
    left = incomplete(running, watch) if stalled else None
    if left:
        print(f"   extraction {running.kind} stalled: {left}", file=sys.stderr, flush=True)
    bodies = running.llm.bodies()
    calls = calls_made(stats)
    projected = asyncio.run(
        wait_drained(settings, "projector", timeout=timeout, worker=processes["projector"])
    )
    limit = running.in_flight_limit
    running.llm.reset()
    bare = asyncio.run(bare_client(running.llm.base_url, bodies, limit))
    bare_stats = running.llm.stats()
    if calls_made(bare_stats) != calls:
        raise RuntimeError(f"the bare client made {calls_made(bare_stats)} calls, not {calls}")
    result = {
        "users": users,
        "extraction_workers": running.extraction_workers,
        "max_in_flight_setting": running.max_in_flight,
        "in_flight_limit": limit,
        "seconds": seconds,
        "calls": calls,
        "calls_by_subject": subjects(stats),
        "results": watch.found,
        "expected_results": watch.expected,
        "stalled": left,
        "result_usage_calls": watch.calls,
        "max_in_flight_seen": stats["max_in_flight"].get("chat", 0),
        "drained_before": before,
        "projector_after_seconds": projected["seconds"],
        "bare": {**bare, "max_in_flight_seen": bare_stats["max_in_flight"].get("chat", 0)},
    }
    shown = {k: result[k] for k in ("users", "extraction_workers", "seconds", "calls")}
    print(f"   extraction {running.kind}: {shown}, bare {bare['seconds']:.1f} s", file=sys.stderr)
    return result


def incomplete(running: ExtractionPipeline, watch: ResultWatch) -> str:
    """What a round that did not finish left behind: the results missing, the stub's counts and
    each worker's last log lines."""
    processes = [*running.pipeline.processes.values(), *running.second.values()]
    tails = "\n".join(f"--- {p.stage}\n{p.log_tail(8)}" for p in processes)
    return (
        f"{watch.found} of {watch.expected} results; users without one, by type "
        f"{watch.missing()}; the stub saw {subjects(running.llm.stats())}\n{tails}"
    )


async def bare_client(
    base_url: str, bodies: Mapping[str, Sequence[Mapping[str, Any]]], limit: int
) -> dict[str, Any]:
    """Send every recorded chat and embeddings body again, at most `limit` at once; seconds
    from the first request to the last answer. aiohttp, not httpx: at 64 requests in flight
    httpx's connection pool took 8.5 s for what aiohttp sent in 3.2 s (160 chat calls of 1 s
    and 40 embeddings; the ideal is 3), and a baseline should be the best a client can do."""
    import aiohttp

    gate = asyncio.Semaphore(limit)
    paths = {"chat": "/chat/completions", "embeddings": "/embeddings"}
    timeout = aiohttp.ClientTimeout(total=600)
    connector = aiohttp.TCPConnector(limit=limit)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def send(kind: str, body: Mapping[str, Any]) -> None:
            async with gate, session.post(base_url + paths[kind], json=body) as response:
                response.raise_for_status()
                await response.read()

        started = time.perf_counter()
        await asyncio.gather(
            *(send(kind, body) for kind in ("chat", "embeddings") for body in bodies.get(kind, []))
        )
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "limit": limit, "client": f"aiohttp {aiohttp.__version__}"}


def calls_per_second(calls: int, seconds: float) -> float:
    if seconds <= 0:
        raise ValueError(f"not a duration: {seconds}")
    return calls / seconds
