"""Encryption: what crypto-shredding costs, sealed ÷ plaintext, measured in the same run.

    python -m bench encryption [--quick] [--brokers apache,tansu]

With `memory.seal_content` on (`MEMSTREAM_SEAL_CONTENT`, the default) the writers seal the
content of what they write with AES-256-GCM data keys kept in MongoDB (`data_keys`), and every
reader opens it (docs/forgetting-encryption.md). This suite prices that on the same workload
both ways. The baseline is always the same thing in plaintext, so **every ratio is sealed ÷
plaintext**: for a throughput (turns/s, events/s) a ratio below 1 is the share of the speed
sealing keeps (0.9: 10% slower); for a cost (µs, bytes) a ratio above 1 is how many times the
plaintext cost sealing pays. Which side runs first alternates from round to round; figures are
medians of the rounds.

- **ingest** (each broker): `MemoryClient.record()` of the same messages (70-character turns,
  10 per call, each call waited for with `acks=all`, as `bench ingest` records them) with
  `MEMSTREAM_SEAL_CONTENT=true` and `=false`; both clients have the same settings, a MongoDB
  included (the run's SecantusDB, a database of this suite's own). Two workloads, each round
  on fresh session ids:
  *continuing sessions*: 20 sessions (5 users) take turns, 10 turns at a time, so each sealed
  session creates its key once (a lookup and an upsert in MongoDB, in a thread) and then seals
  from the key the client caches; *a new session every 10 turns*: every `record()` call opens
  a session, so the sealed side creates a key in MongoDB for each call — the worst case. The
  clock starts after the client's start and so includes the key store's first connection. The
  database has the key index (`MongoDataKeys.prepare`, which the store also creates
  before its first lookup by subject); without it every new key's lookup scans the collection
  (a cost growing with the number of keys).
- **replay** (each broker): the log of `bench projection` (`bench.projection_workload`: turns,
  snapshots, one extraction result per snapshot and memory type with ADD / REINFORCE / UPDATE
  decisions and 384-d vectors) is written twice, plaintext and sealed (`encode(event,
  sealer(StoreKeyRing(store, blocking=True)))`: turn content with session keys, decisions with
  memory keys), each to its own topics. Each round, `memstream replay`'s code
  (`memstream.cli.replay.kafka_events(kafka, keys=ring)` then `replay`) rebuilds the read model
  from each log into a fresh database, with a fresh `MongoDataKeys` (an empty key cache, like a
  new `memstream replay` process) over the database holding the keys: the plaintext side reads
  through the same ring and opener and finds nothing to open. events/s = log records / seconds,
  also for the reading alone (fetch, decode, open: where every key lookup happens). The first
  round compares both read models document for document (`replay_differences` in the raw
  figures: empty when they are the same).
- **live projector** (each broker, full profile only): the real projector stage (`memstream
  worker --stage projector`, a child process) projects each log as `bench projection` times it
  (`bench.suites.projection.live`: started on empty topics, the log produced at once, the
  clock stopped when every document is in the database); the sealed side's keys are copied
  into the projector's database beforehand (it reads them from its own), outside the timing.
- **micro** (CPU only, no I/O, key in memory): for a turn of 60 B, 300 B and 4,000 B content,
  µs to write its record (`encode(turn, sealer(ring))` vs `encode(turn)`) and to read it
  (`decode(record, opener(ring))` of the sealed vs the plaintext record); the notes give
  `seal_payload` and `open_payload` alone, on the turn's JSON. And the record's bytes sealed vs
  plaintext, per turn size and per record of the replay's log.

Database: SecantusDB, the embedded default (a Python server; a real `mongod` was not measured):
the sealed side's key lookups and creations are round trips to it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from pymongo import MongoClient
from pymongo.database import Database

from bench.core import BenchContext, Figure, SuiteResult, alternate, median
from bench.projection_workload import Workload, generate
from bench.suites.ingest import BATCH, conversation
from bench.suites.projection import expected_counts, live, produce, records
from bench.suites.projection import replayed as replayed_with
from bench.suites.sealing import TURN_SIZES, TurnSize, turn_of
from events.codec import AnyEvent, decode, encode
from events.turns import TurnRecorded
from handlers.key_ring import StoreKeyRing
from handlers.sealed_events import KeyRing, open_payload, opener, seal_payload, sealer
from handlers.sealing import DataKey, KeyScope, UnknownKey, data_key_id
from memstream.cli.replay import differences
from memstream.config import load_settings
from memstream.keystore.mongo import DATA_KEYS, MongoDataKeys
from memstream.runtime.pipeline import KAFKA_ENVIRONMENT, TANSU_ENVIRONMENT
from memstream.runtime.topics import ensure_topics
from memstream.sdk.client import MemoryClient
from streams.settings import utc_now

Db = Database[dict[str, Any]]
Log = dict[str, list[tuple[bytes, bytes]]]
SIDES = ("plaintext", "sealed")
PLAINTEXT = "the same workload in plaintext"
SEED = 11
SESSIONS = 20
"""Continuing sessions: this many take turns (5 users), `BATCH` turns per `record()`."""
SIZES: dict[str, dict[str, int]] = {
    "quick": {
        "turns": 1_000,
        "ingest_rounds": 2,
        "users": 2,
        "replay_rounds": 2,
        "live_rounds": 0,
        "iterations": 1_000,
        "micro_rounds": 2,
    },
    "full": {
        "turns": 5_000,
        "ingest_rounds": 4,
        "users": 16,
        "replay_rounds": 5,
        "live_rounds": 3,
        "iterations": 10_000,
        "micro_rounds": 5,
    },
}


def ordered(plaintext_first: bool) -> tuple[str, str]:
    return SIDES if plaintext_first else (SIDES[1], SIDES[0])


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


# -- ingest --------------------------------------------------------------------------------------

INGEST_WORKLOADS = ("continuing sessions", "new session every 10 turns")


def sessions_of(workload: str, calls: int, tag: str) -> list[tuple[str, str]]:
    """(user, session) of each `record()` call, fresh ids per `tag`."""
    if workload == INGEST_WORKLOADS[0]:
        return [(f"u{i % SESSIONS % 5}", f"{tag}-c{i % SESSIONS}") for i in range(calls)]
    return [(f"u{i % 50}", f"{tag}-n{i}") for i in range(calls)]


async def record_turns(
    env: dict[str, str], messages: list[dict[str, str]], sessions: list[tuple[str, str]]
) -> float:
    """turns/s of `MemoryClient.record()` over `messages`, `BATCH` per call, one call per
    entry of `sessions`."""
    settings = load_settings(environ=env)
    async with MemoryClient(settings) as client:
        started = time.perf_counter()
        for index, (user, session) in enumerate(sessions):
            batch = messages[index * BATCH : (index + 1) * BATCH]
            await client.record(user, session, batch)
        return len(messages) / (time.perf_counter() - started)


async def ingest(bootstrap: str, mongo_uri: str, turns: int, rounds: int) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "MEMSTREAM_TOPIC_PREFIX": f"bench-enc-ingest-{run}.",
        "MEMSTREAM_CONFIG": "/dev/null",
        "MONGODB_URI": mongo_uri,
        "MONGODB_DATABASE": f"bench_enc_ingest_{run}",
    }
    await ensure_topics(load_settings(environ=env).kafka)
    messages = conversation(turns)
    calls = len(messages) // BATCH
    rates: dict[str, dict[str, list[float]]] = {w: {s: [] for s in SIDES} for w in INGEST_WORKLOADS}
    keys: MongoClient[dict[str, Any]] = MongoClient(mongo_uri, tz_aware=True)
    database = keys[env["MONGODB_DATABASE"]]
    try:
        # The key index, before the clock starts (the key store would create it on first use):
        # without it each new key's lookup scans the collection.
        MongoDataKeys(database, clock=utc_now).prepare()
        for index, plaintext_first in alternate(rounds):
            for workload in INGEST_WORKLOADS:
                for side in ordered(plaintext_first):
                    sealed = "true" if side == "sealed" else "false"
                    sessions = sessions_of(workload, calls, f"r{index}{side[0]}")
                    env_side = {**env, "MEMSTREAM_SEAL_CONTENT": sealed}
                    rates[workload][side].append(await record_turns(env_side, messages, sessions))
        created = database[DATA_KEYS].count_documents({})
        keys.drop_database(database.name)
    finally:
        keys.close()
    return {"turns/s": rates, "keys_created": created}


def ingest_figures(kind: str, raw: dict[str, Any], turns: int) -> list[Figure]:
    figures = []
    for workload in INGEST_WORKLOADS:
        rates = raw["turns/s"][workload]
        keys = SESSIONS if workload == INGEST_WORKLOADS[0] else turns // BATCH
        note = f"{turns:,} turns, {keys} new session keys per round"
        figures.append(
            Figure(
                f"encryption: ingest, {workload}",
                kind,
                "turns/s",
                median(rates["sealed"]),
                median(rates["plaintext"]),
                "MemoryClient.record(), MEMSTREAM_SEAL_CONTENT=false",
                note=note,
            )
        )
    return figures


# -- replay and the live projector ---------------------------------------------------------------


def sealed_records(workload: Workload, ring: KeyRing) -> Log:
    """`bench.suites.projection.records`, content sealed as the writers seal it."""
    seal = sealer(ring)

    def each(events: list[Any]) -> list[tuple[bytes, bytes]]:
        return [(e.key.encode(), encode(e, seal)) for e in events]

    return {
        "turns": each(workload.turns),
        "snapshots": each(workload.snapshots),
        "memories": each(workload.results),
    }


def log_bytes(log: Log) -> int:
    return sum(len(value) for items in log.values() for _, value in items)


def replayed(env: dict[str, str], keys_db: Db, target: Db, events: int) -> dict[str, float]:
    """`memstream replay`'s code over the topics of `env` into `target`, opening with a new key
    store over `keys_db` (cold cache)."""
    ring = StoreKeyRing(MongoDataKeys(keys_db, clock=utc_now))
    return replayed_with(env, target, events, keys=ring)


def projection(
    context: BenchContext,
    kind: str,
    client: MongoClient[dict[str, Any]],
    workload: Workload,
    sizes: dict[str, int],
) -> dict[str, Any]:
    bootstrap = context.broker(kind).bootstrap_servers  # type: ignore[arg-type]
    run = uuid.uuid4().hex[:8]
    name = f"bench_enc_{run}_{kind}"
    log_dir = context.workdir / f"encryption-{kind}-{run}"
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "config.yaml").write_text("# settings come from the environment\n")
    keys_db = client[f"{name}_keys"]
    store = MongoDataKeys(keys_db, clock=utc_now)
    store.prepare()
    logs = {
        "plaintext": records(workload),
        "sealed": sealed_records(workload, StoreKeyRing(store, blocking=True)),
    }
    events = len(workload.events)

    def environment(label: str) -> dict[str, str]:
        return {
            "MEMSTREAM_CONFIG": str(log_dir / "config.yaml"),
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "MONGODB_URI": context.mongo().uri,
            "MONGODB_DATABASE": f"{name}_{label}",
            "MEMSTREAM_TOPIC_PREFIX": f"bench-enc-{run}-{label}.",
            "MEMSTREAM_GROUP_PREFIX": f"bench-enc-{run}-{label}-",
            **(TANSU_ENVIRONMENT if kind == "tansu" else KAFKA_ENVIRONMENT),
        }

    logged = {side: environment(side) for side in SIDES}
    for side in SIDES:  # each log in its own topics, once: a replay reads them again each round
        settings = load_settings(environ=logged[side])
        asyncio.run(ensure_topics(settings.kafka))
        asyncio.run(produce(settings, logs[side]))
    raw: dict[str, Any] = {
        "keys": keys_db[DATA_KEYS].count_documents({}),
        "replay": [],
        "live": [],
    }
    for index, plaintext_first in alternate(sizes["replay_rounds"]):
        result: dict[str, Any] = {"plaintext_first": plaintext_first}
        for side in ordered(plaintext_first):
            result[side] = replayed(logged[side], keys_db, client[f"{name}_{index}_{side}"], events)
        if index == 0:
            raw["replay_differences"] = differences(
                client[f"{name}_0_plaintext"], client[f"{name}_0_sealed"]
            )
        for side in SIDES:
            client.drop_database(f"{name}_{index}_{side}")
        raw["replay"].append(result)
        shown = ", ".join(f"{s} {rate(events, result[s]['seconds']):.0f}" for s in SIDES)
        print(f"   encryption replay {kind} round {index}: {shown} events/s", file=sys.stderr)
    expected = expected_counts(workload)
    for index, plaintext_first in alternate(sizes["live_rounds"]):
        result = {"plaintext_first": plaintext_first}
        for side in ordered(plaintext_first):
            label = f"live{index}{side[0]}"
            env = environment(label)
            live_db = client[env["MONGODB_DATABASE"]]
            if side == "sealed":  # the projector reads the keys from its own database
                live_db[DATA_KEYS].insert_many(list(keys_db[DATA_KEYS].find()))
            result[side] = live(env, live_db, logs[side], expected, log_dir / label)
            client.drop_database(live_db.name)
        raw["live"].append(result)
        shown = ", ".join(f"{s} {rate(events, result[s]['seconds']):.0f}" for s in SIDES)
        print(f"   encryption live {kind} round {index}: {shown} events/s", file=sys.stderr)
    client.drop_database(keys_db.name)
    return raw


def projection_figures(kind: str, events: int, raw: dict[str, Any]) -> list[Figure]:
    def rates(name: str, side: str, key: str = "seconds") -> float:
        return median([rate(events, r[side][key]) for r in raw[name]])

    def figure(benchmark: str, name: str, key: str, note: str) -> Figure:
        sealed, plaintext = rates(name, "sealed", key), rates(name, "plaintext", key)
        return Figure(benchmark, kind, "events/s", sealed, plaintext, PLAINTEXT, note=note)

    logged = f"{events} events, {raw['keys']} data keys"
    figures = [
        figure("encryption: replay", "replay", "seconds", f"{logged}; read, open and project"),
        figure(
            "encryption: replay, reading the log",
            "replay",
            "read_seconds",
            "kafka_events: fetch, decode, open (every key lookup)",
        ),
    ]
    if raw["live"]:
        figures.append(figure("encryption: projection live", "live", "seconds", logged))
    return figures


# -- micro: CPU per turn, key in memory ----------------------------------------------------------


class MemoryRing:
    """A key ring holding one key in memory (the store's cache, without the store)."""

    def __init__(self, key: DataKey) -> None:
        self.key = key

    def sealing_key(self, scope: KeyScope, owner: str, subject: str | None) -> DataKey:
        return self.key

    def opening_key(self, key_id: str) -> DataKey | None:
        if key_id != self.key.key_id:
            raise UnknownKey(key_id)
        return self.key


def micro_calls(turn: TurnRecorded, ring: MemoryRing) -> dict[str, Callable[[], object]]:
    """What is timed for one turn: sealing and opening its JSON; writing and reading its
    record, sealed and plaintext (the reader has the opener either way, as every reader has)."""
    payload = turn.model_dump(mode="json")
    sealed_payload = seal_payload(dict(payload), ring)
    seal, open_content = sealer(ring), opener(ring)
    sealed_record, plain_record = encode(turn, seal), encode(turn)
    return {
        "seal_payload": lambda: seal_payload(dict(payload), ring),
        "open_payload": lambda: open_payload(dict(sealed_payload), ring),
        "write sealed": lambda: encode(turn, seal),
        "write plaintext": lambda: encode(turn),
        "read sealed": lambda: decode(sealed_record, open_content),
        "read plaintext": lambda: decode(plain_record, open_content),
    }


def micros_per_call(call: Callable[[], object], iterations: int) -> float:
    started = time.perf_counter()
    for _ in range(iterations):
        call()
    return (time.perf_counter() - started) / iterations * 1e6


def micro(size: TurnSize, iterations: int, rounds: int) -> dict[str, Any]:
    turn = turn_of(size)
    ring = MemoryRing(DataKey(data_key_id("session", "u1", "s1", 1), os.urandom(32)))
    calls = micro_calls(turn, ring)
    if decode(encode(turn, sealer(ring)), opener(ring)) != turn:
        raise RuntimeError("a sealed turn does not open to itself")
    for call in calls.values():  # warm up: the key's AES context, pydantic's serializers
        micros_per_call(call, min(iterations, 200))
    micros: dict[str, list[float]] = {name: [] for name in calls}
    for _, forward in alternate(rounds):
        for name in list(calls) if forward else list(reversed(calls)):
            micros[name].append(micros_per_call(calls[name], iterations))
    return {
        "content_bytes": size.content_bytes,
        "micros": micros,
        "record_bytes": {"sealed": len(encode(turn, sealer(ring))), "plaintext": len(encode(turn))},
    }


def micro_figures(size: TurnSize, measured: dict[str, Any]) -> list[Figure]:
    setting = f"{size.label}, {size.content_bytes:,} B content"
    micros = {name: median(values) for name, values in measured["micros"].items()}
    record = measured["record_bytes"]
    return [
        Figure(
            "encryption: write a turn record",
            setting,
            "µs",
            micros["write sealed"],
            micros["write plaintext"],
            "encode, plaintext",
            note=f"seal_payload alone {micros['seal_payload']:.1f} µs",
        ),
        Figure(
            "encryption: read a turn record",
            setting,
            "µs",
            micros["read sealed"],
            micros["read plaintext"],
            "decode of the plaintext record",
            note=f"open_payload alone {micros['open_payload']:.1f} µs",
        ),
        Figure(
            "encryption: turn record size",
            setting,
            "bytes",
            float(record["sealed"]),
            float(record["plaintext"]),
            "the plaintext record",
        ),
    ]


# -- the suite -----------------------------------------------------------------------------------


def log_figure(workload: Workload, plaintext: Log, sealed: Log) -> Figure:
    events = len(workload.events)
    kinds = ", ".join(
        f"{name} {log_bytes({name: sealed[name]}) / log_bytes({name: plaintext[name]}):.2f}x"
        for name in plaintext
    )
    return Figure(
        "encryption: log record size",
        f"replay's log, {events} records",
        "bytes per record",
        log_bytes(sealed) / events,
        log_bytes(plaintext) / events,
        "the plaintext log",
        note=f"turns, snapshots, results (vectors sealed as float64s): {kinds}",
    )


class FreshKeys:
    """A new in-memory key for every (scope, owner, subject): for record sizes."""

    def __init__(self) -> None:
        self.keys: dict[str, DataKey] = {}

    def sealing_key(self, scope: KeyScope, owner: str, subject: str | None) -> DataKey:
        key_id = data_key_id(scope, owner, subject, 1)
        return self.keys.setdefault(key_id, DataKey(key_id, os.urandom(32)))

    def opening_key(self, key_id: str) -> DataKey | None:
        return self.keys[key_id]


def run(context: BenchContext) -> SuiteResult:
    sizes = SIZES["quick" if context.quick else "full"]
    workload: Workload = generate(SEED, users=sizes["users"], sessions=1, snapshots=3)
    events: list[AnyEvent] = workload.events
    figures: list[Figure] = []
    raw: dict[str, Any] = {
        "sizes": sizes,
        "events": len(events),
        "ratio": "sealed / plaintext (the baseline is the same workload in plaintext)",
        "micro": {},
    }
    for size in TURN_SIZES:
        measured = micro(size, sizes["iterations"], sizes["micro_rounds"])
        raw["micro"][size.label] = measured
        figures.extend(micro_figures(size, measured))
        shown = {name: round(median(values), 1) for name, values in measured["micros"].items()}
        print(f"   encryption {size.label}: µs {shown}", file=sys.stderr, flush=True)
    logs = {"plaintext": records(workload), "sealed": sealed_records(workload, FreshKeys())}
    raw["log_bytes"] = {
        side: {name: log_bytes({name: items}) for name, items in log.items()}
        for side, log in logs.items()
    }
    figures.append(log_figure(workload, logs["plaintext"], logs["sealed"]))
    client: MongoClient[dict[str, Any]] = MongoClient(context.mongo().uri, tz_aware=True)
    try:
        for kind in context.brokers:
            bootstrap = context.broker(kind).bootstrap_servers
            raw[kind] = {
                "ingest": asyncio.run(
                    ingest(bootstrap, context.mongo().uri, sizes["turns"], sizes["ingest_rounds"])
                )
            }
            figures.extend(ingest_figures(kind, raw[kind]["ingest"], sizes["turns"]))
            medians = {
                w: {s: round(median(v)) for s, v in sides.items()}
                for w, sides in raw[kind]["ingest"]["turns/s"].items()
            }
            print(f"   encryption ingest {kind}: turns/s {medians}", file=sys.stderr, flush=True)
            raw[kind]["projection"] = projection(context, kind, client, workload, sizes)
            figures.extend(projection_figures(kind, len(events), raw[kind]["projection"]))
    finally:
        client.close()
    return SuiteResult(figures, raw)


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["encryption", *sys.argv[1:]]))
