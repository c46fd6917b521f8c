"""Restart cost against history for the stages that hold memories: extract:semantic and the
projector, each restarted with H and with 10H memories (`python -m bench scale`, figure 3; the
mechanics are `bench.scale_history`'s).

Their history (topics and database of their own, only semantic enabled): history snapshots
written to the turns and snapshots topics (`bench.scale_workload.history_snapshots`); the stub
LLM (no delay) answers each with `FACTS` facts, so the extraction stage ADDs them (`FACTS`
memories per user: the history grows by users, as on a platform with many) and the projector
writes them to MongoDB. Both workers run while it is built.

* **extract:semantic** is restarted while the projector runs on; its fresh workload is
  `FRESH_SNAPSHOTS` snapshots of as many existing users, answered with `FRESH_FACTS` fact each
  (so that the time is mostly the restart's, not the work's); caught up when their results are
  on the memories topic.
* **the projector** is restarted while the extraction stage runs on; its fresh workload is a
  small realistic log from `bench.projection_workload` (two users' turns, snapshots and the
  episodic, procedural and taxonomic results the real reconciler decided; the semantic results
  are left out because the running semantic stage writes its own for those snapshots); caught
  up when MongoDB has those three extractions of every snapshot.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from pymongo import MongoClient
from pymongo.database import Database

from bench.kafka_probe import wait_ready
from bench.projection_workload import generate
from bench.scale_history import (
    CATCH_UP_TIMEOUT,
    PARTITIONS,
    START_TIMEOUT,
    History,
    Restart,
    Worker,
    drain_history,
    print_restart,
    restarted,
    restarted_watching,
)
from bench.scale_stages import ResultWatch, prepare_database, scale_environment
from bench.scale_workload import (
    HistorySnapshot,
    history_snapshot,
    history_snapshots,
    keyed,
    produce,
    token_for,
    user_id,
    utc_now,
)
from bench.stub_llm import StubLLMServer
from bench.suites.projection import produce as produce_log
from bench.suites.projection import records
from memstream.config import Settings, load_settings
from memstream.runtime.topics import ensure_topics
from projections.store import SNAPSHOTS

FACTS = 20
"""Memories per history snapshot (and per user)."""
FRESH_SNAPSHOTS = 10
"""The extraction stage's fresh workload (fewer if the smallest history has fewer users)."""
FRESH_FACTS = 1
PROJECTED_TYPES = ("episodic", "procedural", "taxonomic")
"""The results of the projector's fresh workload (the semantic stage writes its own)."""
Db = Database[dict[str, Any]]


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
        db = client[settings.mongodb.database]
        found = History([], [])
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
                    stage: drain_history(
                        settings, worker, timeout=120 + size / 2, stalls=found.stalls
                    )
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
                    number = index * repeats + attempt
                    chosen = fresh_users(users, fresh, number)
                    found.restarts.append(
                        extraction_restart(
                            stages["extract:semantic"], settings, size, chosen, number, drained
                        )
                    )
                    print_restart(kind, found.restarts[-1])
                    found.restarts.append(
                        projector_restart(stages["projector"], settings, db, size, number, drained)
                    )
                    print_restart(kind, found.restarts[-1])
                llm.configure(facts=FACTS)
        finally:
            for worker in stages.values():
                worker.stop()
            client.close()
    return found


async def write_snapshots(settings: Settings, history: Sequence[HistorySnapshot]) -> None:
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


def extraction_restart(
    worker: Worker,
    settings: Settings,
    size: int,
    chosen: Sequence[int],
    number: int,
    drained: dict[str, dict[str, Any]],
) -> Restart:
    worker.stop()
    now = utc_now()
    fresh = [
        history_snapshot(user_id("hist", n), f"fresh{number}", token_for("hist", n, number), now)
        for n in chosen
    ]
    watch = ResultWatch(frozenset(item.snapshot.user_id for item in fresh), ("semantic",))
    return asyncio.run(
        restarted_watching(
            worker,
            settings,
            settings.kafka.topics.memories,
            partial(write_snapshots, settings, fresh),
            watch,
            "the extraction stage's fresh results",
            history=size,
            fresh=len(fresh),
            records=int(drained["extract:semantic"]["records"]),
        )
    )


def projector_restart(
    worker: Worker,
    settings: Settings,
    db: Db,
    size: int,
    number: int,
    drained: dict[str, dict[str, Any]],
) -> Restart:
    worker.stop()
    workload = generate(1000 + number, users=2, snapshots=1)
    workload.results = [r for r in workload.results if r.memory_type in PROJECTED_TYPES]
    log = records(workload)
    ids = [snapshot.event_id for snapshot in workload.snapshots]
    return asyncio.run(
        restarted(
            worker,
            partial(produce_log, settings, log),
            partial(extracted_in_database, db, ids, PROJECTED_TYPES),
            history=size,
            fresh=len(workload.events),
            records=int(drained["projector"]["records"]),
        )
    )


async def extracted_in_database(db: Db, snapshot_ids: list[str], types: Sequence[str]) -> float:
    """Poll until every snapshot of `snapshot_ids` has its extraction of every one of `types`
    in the read model; when that was first seen."""
    deadline = time.monotonic() + CATCH_UP_TIMEOUT
    query: dict[str, Any] = {"_id": {"$in": snapshot_ids}}
    query |= {f"extractions.{t}": {"$exists": True} for t in types}
    while time.monotonic() < deadline:
        found = await asyncio.to_thread(db[SNAPSHOTS].count_documents, query)
        if found >= len(snapshot_ids):
            return time.perf_counter()
        await asyncio.sleep(0.05)
    raise TimeoutError(f"the projector did not project {len(snapshot_ids)} fresh snapshots")
