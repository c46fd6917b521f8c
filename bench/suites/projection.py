"""Projection and replay: events/s into the MongoDB read model vs raw pymongo `bulk_write`.

    python -m bench projection [--quick] [--brokers apache,tansu]

The log is a realistic mix built with the real event models and handlers
(`bench.projection_workload`: turns, snapshots, one extraction result per snapshot and memory
type carrying ADD / REINFORCE / UPDATE decisions with 384-d vectors). On each broker, every round:

- **live**: the real projector stage (`memstream worker --stage projector`, a child process, a
  fresh consumer group and database) is started on empty topics; once it is assigned its
  partitions the whole log is produced at once and the clock runs until every document is in
  the database (polled; the production time counts against us);
- **replay**: `memstream replay`'s code path (`memstream.cli.replay.kafka_events` then `replay`)
  reads the round's topics and rebuilds the read model into a fresh database in bulk;
- **baseline**: the documents the live projector wrote (read back from its database once) are
  inserted into a fresh database with the same indexes by pymongo `bulk_write` (ordered
  `InsertOne` batches of 1,000, the replay's batch size).

All three report *events/s*: the number of log records (turns + snapshots + extraction results)
divided by the side's time, so the ratio is the baseline's time over ours for the same final
read model. Which side runs first alternates from round to round (the first round runs ours
first: the baseline's documents come from it). Index creation is outside every timing.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from pymongo import InsertOne, MongoClient
from pymongo.database import Database

from bench.core import Aim, BenchContext, Figure, Stopwatch, SuiteResult, median
from bench.projection_workload import Workload, generate
from events.codec import encode
from events.memories import MEMORY_TYPES
from handlers.key_ring import StoreKeyRing
from memstream.cli.replay import COMPARED, differences, kafka_events, replay
from memstream.config import Settings, load_settings
from memstream.runtime.pipeline import KAFKA_ENVIRONMENT, TANSU_ENVIRONMENT, StageProcess
from memstream.runtime.topics import ensure_topics
from projections import ensure_indexes
from projections.store import MEMORIES, MEMORY_EVENTS, SNAPSHOTS, TURNS

Db = Database[dict[str, Any]]
SEED = 11
BATCH = 1_000
BASELINE = "raw pymongo bulk_write, same documents"
Sizes = dict[str, int]
QUICK: Sizes = {"users": 4, "sessions": 1, "snapshots": 3, "rounds": 2}
FULL: Sizes = {"users": 16, "sessions": 1, "snapshots": 3, "rounds": 3}


def expected_counts(workload: Workload) -> dict[str, int]:
    """What the read model holds once the whole workload is projected."""
    actions = workload.actions()
    return {
        TURNS: len(workload.turns),
        SNAPSHOTS: len(workload.snapshots),
        MEMORY_EVENTS: workload.decisions,
        MEMORIES: actions.get("MemoryAdded", 0) + actions.get("MemoryUpdated", 0),
        **{f"extractions.{t}": len(workload.snapshots) for t in MEMORY_TYPES},
    }


def counts(db: Db) -> dict[str, int]:
    """The same figures as `expected_counts`, read from a database."""
    found = {
        TURNS: db[TURNS].count_documents({}),
        SNAPSHOTS: db[SNAPSHOTS].count_documents({"turn_ids": {"$exists": True}}),
        MEMORY_EVENTS: db[MEMORY_EVENTS].count_documents({}),
        MEMORIES: db[MEMORIES].count_documents({}),
    }
    for memory_type in MEMORY_TYPES:
        slot = f"extractions.{memory_type}"
        found[slot] = db[SNAPSHOTS].count_documents({slot: {"$exists": True}})
    return found


def records(workload: Workload) -> dict[str, list[tuple[bytes, bytes]]]:
    """The encoded log, per topic kind: (key, value) in each producer's order."""
    return {
        "turns": [(e.key.encode(), encode(e)) for e in workload.turns],
        "snapshots": [(e.key.encode(), encode(e)) for e in workload.snapshots],
        "memories": [(e.key.encode(), encode(e)) for e in workload.results],
    }


def rate(events: int, seconds: float) -> float:
    return events / seconds if seconds > 0 else 0.0


# -- the sides -----------------------------------------------------------------------------------


async def produce(settings: Settings, log: dict[str, list[tuple[bytes, bytes]]]) -> None:
    """The whole log into the round's topics, keyed as the stages key it. Turns are sent like the
    SDK sends them; snapshots and results like the stages' Faust producers (one record per batch
    on Tansu: `MEMSTREAM_PRODUCER_MAX_BATCH_SIZE`)."""
    kafka = settings.kafka
    topics = {"turns": kafka.topics.turns, "snapshots": kafka.topics.snapshots}
    topics["memories"] = kafka.topics.memories
    options: dict[str, Any] = {}
    if kafka.producer_max_batch_size:
        options["max_batch_size"] = kafka.producer_max_batch_size
    sdk = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all", linger_ms=5)
    stages = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all", **options)
    await sdk.start()
    await stages.start()
    try:
        futures = []
        for kind, items in log.items():
            producer = sdk if kind == "turns" else stages
            for key, value in items:
                futures.append(await producer.send(topics[kind], value, key=key))
        await asyncio.gather(*futures)
    finally:
        await sdk.stop()
        await stages.stop()


def wait_until_projected(db: Db, expected: dict[str, int], timeout: float) -> dict[str, int]:
    """Poll (cheap counts first) until the database holds the whole workload."""
    deadline = time.monotonic() + timeout
    found: dict[str, int] = {}
    while time.monotonic() < deadline:
        if (
            db[MEMORY_EVENTS].estimated_document_count() >= expected[MEMORY_EVENTS]
            and db[TURNS].estimated_document_count() >= expected[TURNS]
        ):
            found = counts(db)
            if found == expected:
                return found
        time.sleep(0.05)
    raise TimeoutError(f"not projected after {timeout:.0f} s: {found or counts(db)} != {expected}")


def live(
    env: dict[str, str],
    db: Db,
    log: dict[str, list[tuple[bytes, bytes]]],
    expected: dict[str, int],
    log_dir: Path,
) -> dict[str, float]:
    settings = load_settings(environ=env)
    asyncio.run(ensure_topics(settings.kafka))
    ensure_indexes(db)  # outside the timing (the stage also does it when it starts)
    launched = time.perf_counter()
    worker = StageProcess("projector", env, log_dir).start()
    try:
        deadline = time.monotonic() + 120
        while not worker.is_ready():
            if not worker.running or time.monotonic() > deadline:
                raise RuntimeError(f"projector not ready:\n{worker.log_tail()}")
            time.sleep(0.05)
        started = time.perf_counter()
        startup = started - launched
        asyncio.run(produce(settings, log))
        produced = time.perf_counter() - started
        wait_until_projected(db, expected, timeout=600)
        seconds = time.perf_counter() - started
    finally:
        worker.stop()
    return {"seconds": seconds, "produce_seconds": produced, "startup_seconds": startup}


def replayed(
    env: dict[str, str], target: Db, events: int, keys: StoreKeyRing | None = None
) -> dict[str, float]:
    """`memstream replay`'s code over the topics of `env` into `target` (sealed content opened
    with `keys`)."""
    settings = load_settings(environ=env)
    with Stopwatch() as reading:
        read = kafka_events(settings.kafka, keys=keys)
    if len(read) != events:
        raise RuntimeError(f"replay read {len(read)} events of {events}")
    report = replay(iter(read), target, total=len(read), show=False)
    if report.collisions:
        raise RuntimeError(f"replay collisions: {report.collisions[:3]}")
    return {
        "seconds": reading.seconds + report.seconds,
        "read_seconds": reading.seconds,
        "project_seconds": report.seconds,
        "writes": report.writes,
    }


def bulk_baseline(documents: dict[str, list[dict[str, Any]]], target: Db) -> dict[str, float]:
    ensure_indexes(target)
    with Stopwatch() as watch:
        for name, docs in documents.items():
            for start in range(0, len(docs), BATCH):
                batch = [InsertOne(doc) for doc in docs[start : start + BATCH]]
                target[name].bulk_write(batch, ordered=True)
    return {"seconds": watch.seconds, "documents": sum(len(d) for d in documents.values())}


# -- the suite -----------------------------------------------------------------------------------


def measure_broker(
    context: BenchContext,
    kind: str,
    client: MongoClient[dict[str, Any]],
    workload: Workload,
    sizes: Sizes,
) -> dict[str, Any]:
    bootstrap = context.broker(kind).bootstrap_servers  # type: ignore[arg-type]
    run_id = uuid.uuid4().hex[:8]
    log_dir = context.workdir / f"projection-{kind}-{run_id}"
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "config.yaml").write_text("# settings come from the environment\n")
    log = records(workload)
    expected = expected_counts(workload)
    events = len(workload.events)
    rounds: list[dict[str, Any]] = []
    documents: dict[str, list[dict[str, Any]]] = {}
    raw: dict[str, Any] = {"rounds": rounds}
    began = time.perf_counter()
    for index in range(sizes["rounds"]):
        ours_first = index % 2 == 0  # round 0: ours first, the baseline's documents come from it
        name = f"bench_proj_{run_id}_{kind}_{index}"
        env = {
            "MEMSTREAM_CONFIG": str(log_dir / "config.yaml"),
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "MONGODB_URI": context.mongo().uri,
            "MONGODB_DATABASE": f"{name}_live",
            "MEMSTREAM_TOPIC_PREFIX": f"bench-proj-{run_id}-{index}.",
            "MEMSTREAM_GROUP_PREFIX": f"bench-proj-{run_id}-{index}-",
            **(TANSU_ENVIRONMENT if kind == "tansu" else KAFKA_ENVIRONMENT),
        }
        live_db, replay_db, bulk_db = (
            client[f"{name}_{side}"] for side in ("live", "replay", "bulk")
        )
        result: dict[str, Any] = {"ours_first": ours_first}
        order = ("live", "replay", "baseline") if ours_first else ("baseline", "live", "replay")
        for side in order:
            if side == "live":
                result["live"] = live(env, live_db, log, expected, log_dir / f"round-{index}")
            elif side == "replay":
                result["replay"] = replayed(env, replay_db, events)
            else:
                result["baseline"] = bulk_baseline(documents, bulk_db)
            if side == "live" and not documents:
                documents = {c: list(live_db[c].find()) for c in COMPARED}
                raw["documents"] = {c: len(d) for c, d in documents.items()}
        if index == 0:  # the replayed read model is the live one, document for document
            raw["replay_differences"] = differences(live_db, replay_db)
        for db in (live_db, replay_db, bulk_db):
            client.drop_database(db.name)
        rounds.append(result)
        shown = ", ".join(
            f"{side} {rate(events, result[side]['seconds']):.0f}"
            for side in ("live", "replay", "baseline")
        )
        print(f"   projection {kind} round {index}: {shown} events/s", file=sys.stderr)
    raw["seconds"] = time.perf_counter() - began
    return raw


def figures_for(kind: str, events: int, raw: dict[str, Any]) -> list[Figure]:
    rounds = raw["rounds"]

    def side(name: str, key: str = "seconds") -> float:
        return median([rate(events, r[name][key]) for r in rounds])

    baseline = side("baseline")
    note = f"{events} events → {sum(raw['documents'].values())} documents"
    return [
        Figure(
            "projection live",
            kind,
            "events/s",
            side("live"),
            baseline,
            BASELINE,
            Aim(">=", 0.5),
            note,
        ),
        Figure(
            "replay", kind, "events/s", side("replay"), baseline, BASELINE, Aim(">=", 0.8), note
        ),
        Figure(
            "replay, projection only",
            kind,
            "events/s",
            side("replay", "project_seconds"),
            baseline,
            BASELINE,
            None,
            "events already read from the log",
        ),
    ]


def run(context: BenchContext) -> SuiteResult:
    sizes = QUICK if context.quick else FULL
    workload = generate(
        SEED, users=sizes["users"], sessions=sizes["sessions"], snapshots=sizes["snapshots"]
    )
    events = len(workload.events)
    raw: dict[str, Any] = {
        "sizes": sizes,
        "events": events,
        "log": {
            "turns": len(workload.turns),
            "snapshots": len(workload.snapshots),
            "results": len(workload.results),
            "decisions": workload.actions(),
            "bytes": sum(len(value) for items in records(workload).values() for _, value in items),
        },
        "unit": "events/s = log records (turns + snapshots + extraction results) / seconds",
    }
    figures: list[Figure] = []
    client: MongoClient[dict[str, Any]] = MongoClient(context.mongo().uri, tz_aware=True)
    try:
        for kind in context.brokers:
            raw[kind] = measure_broker(context, kind, client, workload, sizes)
            figures.extend(figures_for(kind, events, raw[kind]))
    finally:
        client.close()
    return SuiteResult(figures, raw)


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["projection", *sys.argv[1:]]))
