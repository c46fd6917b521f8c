"""HTTP API vs the SDK's direct path: requests/s and p95 latency of `search` and `record`.

    python -m bench.http_api [--requests 300] [--rounds 3] [--broker tansu|apache] [--out FILE]

One run, one machine: a broker, SecantusDB, the scripted LLM's embeddings (deterministic, local,
near-zero cost, so the figures are memstream's overhead, not a model's), `memstream serve` in a
child process, and in this process one sequential client of each kind:
- direct: `MemoryClient.search` / `MemoryClient.record` (Kafka append, MongoDB read);
- HTTP: the same calls through `HttpMemoryClient` (httpx, keep-alive) → the API → the SDK.
`search` runs over one user's 200 memories (inserted into the read model); `record` appends one
message. Rounds alternate which side runs first; each side's figure is the median over rounds.
No pipeline stages run: `record` is measured up to the broker's acknowledgement, as the SDK's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
from pymongo import MongoClient

from memstream.api.keys import KeyStore
from memstream.config import Settings, load_settings
from memstream.runtime.servers import ApacheKafkaBroker, SecantusServer, TansuBroker
from memstream.runtime.servers.loopback import free_port
from memstream.runtime.topics import ensure_topics
from memstream.sdk.client import MemoryClient
from memstream.sdk.http_client import HttpMemoryClient
from projections.vectors import pack_vector
from tests.support.scripted_llm import ScriptedLLM, embed_text

USER = "bench-user"
MEMORIES = 200
QUERY = "which tea does the user drink in the morning"
MESSAGE = [{"role": "user", "content": "I would like to book a table for two at seven tonight."}]
ROOT = Path(__file__).resolve().parents[1]


def summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    total = sum(latencies)
    return {
        "requests_per_second": len(latencies) / total,
        "p50_ms": statistics.median(ordered) * 1000,
        "p95_ms": p95 * 1000,
    }


def memories(model: str) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    topics = ["tea", "coffee", "Lisbon", "Stripe", "running", "piano", "cats", "Porto"]
    documents = []
    for i in range(MEMORIES):
        text = f"The user fact {i}: likes {topics[i % len(topics)]} number {i} in the morning."
        documents.append(
            {
                "_id": f"m{i}:v1",
                "memory_id": f"m{i}",
                "version": 1,
                "status": "current",
                "memory_type": "semantic",
                "user_id": USER,
                "agent_id": None,
                "subject": "the user",
                "owner": "user",
                "text": text,
                "category": "other",
                "attributes": {},
                "reinforcement_count": 0,
                "created_at": now,
                "updated_at": now,
                "embedding": pack_vector(embed_text(text)),
                "embedding_model": model,
            }
        )
    return documents


async def timed(call: Callable[[], Awaitable[Any]], count: int) -> list[float]:
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        await call()
        latencies.append(time.perf_counter() - started)
    return latencies


def timed_sync(call: Callable[[], Any], count: int) -> list[float]:
    latencies = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - started)
    return latencies


def measure(settings: Settings, url: str, key: str, requests: int, rounds: int) -> dict[str, Any]:
    raw: dict[str, Any] = {"rounds": []}
    with HttpMemoryClient(url, key) as http:

        async def direct_side(operation: str) -> list[float]:
            async with MemoryClient(settings) as memory:
                if operation == "search":
                    await memory.search(USER, QUERY)  # warm: embedder, index
                    return await timed(lambda: memory.search(USER, QUERY), requests)
                return await timed(lambda: memory.record(USER, "bench", MESSAGE), requests)

        def http_side(operation: str) -> list[float]:
            if operation == "search":
                http.search(QUERY, user_id=USER)
                return timed_sync(lambda: http.search(QUERY, user_id=USER), requests)
            return timed_sync(lambda: http.record("bench", MESSAGE, user_id=USER), requests)

        for round_no in range(rounds):
            order = ["direct", "http"] if round_no % 2 == 0 else ["http", "direct"]
            entry: dict[str, Any] = {"order": order}
            for operation in ("search", "record"):
                for side in order:
                    latencies = (
                        asyncio.run(direct_side(operation))
                        if side == "direct"
                        else http_side(operation)
                    )
                    entry[f"{operation}/{side}"] = summary(latencies)
                    print(round_no, operation, side, entry[f"{operation}/{side}"], flush=True)
            raw["rounds"].append(entry)
    figures = {}
    for operation in ("search", "record"):
        for side in ("direct", "http"):
            runs = [r[f"{operation}/{side}"] for r in raw["rounds"]]
            figures[f"{operation}/{side}"] = {
                name: statistics.median(run[name] for run in runs) for name in runs[0]
            }
        direct, over_http = figures[f"{operation}/direct"], figures[f"{operation}/http"]
        figures[f"{operation}/ratio"] = {
            "requests_per_second_http_over_direct": over_http["requests_per_second"]
            / direct["requests_per_second"],
            "p95_http_over_direct": over_http["p95_ms"] / direct["p95_ms"],
        }
    raw["figures"] = figures
    return raw


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--broker", choices=["tansu", "apache"], default="tansu")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "http_api.json")
    args = parser.parse_args()
    run = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="memstream-http-bench-") as scratch:
        broker_type = TansuBroker if args.broker == "tansu" else ApacheKafkaBroker
        with (
            broker_type(Path(scratch) / "broker") as broker,
            SecantusServer(Path(scratch) / "mongo") as mongo,
            ScriptedLLM() as llm,
        ):
            environment = {
                "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
                "MONGODB_URI": mongo.uri,
                "MONGODB_DATABASE": f"bench_{run}",
                "MEMSTREAM_TOPIC_PREFIX": f"b{run}.",
                "OPENAI_BASE_URL": llm.base_url,
                "OPENAI_API_KEY": "bench",
                "MEMSTREAM_LLM_MODEL": llm.model,
                "MEMSTREAM_EMBEDDING_PROVIDER": "openai",
                "MEMSTREAM_EMBEDDING_MODEL": llm.embedding_model,
                "MEMSTREAM_CONFIG": str(Path(scratch) / "none.yaml"),
            }
            if args.broker == "tansu":
                environment["MEMSTREAM_PRODUCER_MAX_BATCH_SIZE"] = "1"
            (Path(scratch) / "none.yaml").write_text("# environment only\n")
            settings = load_settings(environ=environment)
            asyncio.run(ensure_topics(settings.kafka))
            database: MongoClient[dict[str, Any]] = MongoClient(mongo.uri)
            with database:
                database[settings.mongodb.database]["memories"].insert_many(
                    memories(llm.embedding_model)
                )
            key = asyncio.run(_key(settings))
            port = free_port()
            server = subprocess.Popen(
                [sys.executable, "-m", "memstream", "serve", "--port", str(port)],
                env={**os.environ, **environment, "PYTHONPATH": str(ROOT)},
                cwd=ROOT,
            )
            url = f"http://127.0.0.1:{port}"
            try:
                _wait(url)
                raw = measure(settings, url, key, args.requests, args.rounds)
            finally:
                server.terminate()
                server.wait(15)
    raw.update(
        command=" ".join(["python -m bench.http_api", *sys.argv[1:]]),
        broker=args.broker,
        requests_per_round=args.requests,
        memories=MEMORIES,
        machine={"python": platform.python_version(), "cpus": os.cpu_count()},
        measured_at=datetime.now(UTC).isoformat(),
    )
    args.out.write_text(orjson.dumps(raw, option=orjson.OPT_INDENT_2).decode() + "\n")
    print(orjson.dumps(raw["figures"], option=orjson.OPT_INDENT_2).decode())
    return 0


async def _key(settings: Settings) -> str:
    store = KeyStore(settings.mongodb.uri or "", settings.mongodb.database)
    try:
        key, _ = await store.create("bench", "application", "bench")
        return key
    finally:
        await store.close()


def _wait(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/openapi.json").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError("memstream serve did not start")


if __name__ == "__main__":
    sys.exit(main())
