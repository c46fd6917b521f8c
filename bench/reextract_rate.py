"""How fast `memstream reextract` goes through the log, against the live extraction of the same
snapshots in the same run, with an LLM that answers in a fixed time.

    python -m bench.reextract_rate [--users 200] [--out bench/reextract_rate.json]

`memstream up --ephemeral` with the stub LLM (`bench.stub_llm`: every chat answer after 0.5 s,
as many at once as asked; embeddings at once), the semantic type only, each worker keeping 8
calls in flight, two extractors declared alike (`v1`, live, and `v2`):

1. USERS users each record one short session (`bench.scale_workload.conversation`) and all flush
   at once; the clock runs from the first flush until the read model shows every snapshot
   extracted (the live rate);
2. `memstream reextract --extractor v2 --into rate_v2 --json` extracts the same snapshots again
   into a shadow; its own seconds (from its start: the shadow's workers start, read the log,
   extract, and its projector catches up) give the re-extraction rate.

Both also get the rate over the LLM's busy span (the stub's first request to its last answer),
which leaves out starting workers and waiting for the projector. The ratio is re-extraction over
live: the same machine, the same LLM, the same snapshots.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.machine import machine
from bench.promote_flow import memstream, start_up, user_environment
from bench.scale_workload import conversation, token_for, user_id
from bench.stub_llm import StubLLMServer, calls_made

CONFIG = """\
extractor: v1
extractors:
  v1: {}
  v2: {}
"""
CHAT_SECONDS = 0.5
TIMEOUT = 1800.0


async def record_and_flush(environment: dict[str, str], users: int) -> float:
    """Every user's session recorded, then all flushed at once; when the first flush began."""
    from memstream.config import load_settings
    from memstream.sdk.client import MemoryClient

    sessions = [(user_id("rate", i), token_for("rate", i)) for i in range(users)]
    async with MemoryClient(load_settings(environ=environment)) as client:
        await asyncio.gather(*(client.record(u, "s0", conversation(t)) for u, t in sessions))
        started = time.monotonic()
        await asyncio.gather(*(client.flush(u, "s0") for u, _ in sessions))
    return started


def extracted(uri: str, database: str) -> int:
    from pymongo import MongoClient

    client: MongoClient[dict[str, Any]] = MongoClient(uri, tz_aware=True)
    try:
        return client[database]["snapshots"].count_documents(
            {"extractions.semantic": {"$exists": True}}
        )
    finally:
        client.close()


def busy_span(stats: dict[str, Any]) -> float:
    return float(stats["last_end"] - stats["first_start"])


def measure(scratch: Path, users: int) -> dict[str, Any]:
    config = scratch / "project-config.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    with StubLLMServer(scratch / "llm", chat_delay=CHAT_SECONDS) as llm:
        environment = user_environment()
        environment |= {
            "MEMSTREAM_CONFIG": str(config),
            "MEMSTREAM_DATA_DIR": str(scratch / "data"),
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "bench",
            "MEMSTREAM_LLM_MODEL": "stub-llm",
            "MEMSTREAM_EMBEDDING_PROVIDER": "openai",
            "MEMSTREAM_EMBEDDING_MODEL": "stub-embedding",
            "MEMSTREAM_ENABLED_EXTRACTIONS": "semantic",
            "MEMSTREAM_LLM_MAX_IN_FLIGHT": "8",
            "MEMSTREAM_IDLE_TIMEOUT": "86400",  # only the flushes promote
        }
        up, exports = start_up(environment, scratch / "up.log", "--ephemeral")
        environment |= exports
        uri = exports["MONGODB_URI"]
        try:
            llm.reset()
            started = asyncio.run(record_and_flush(environment, users))
            deadline = started + TIMEOUT
            while extracted(uri, "memstream") < users:
                if time.monotonic() > deadline:
                    raise RuntimeError("the live extraction did not finish")
                time.sleep(0.2)
            live_seconds = time.monotonic() - started
            live = llm.stats()
            llm.reset()
            run = memstream(
                environment, "reextract", "--extractor", "v2", "--into", "rate_v2", "--json"
            )
            if run["exit"] != 0:
                raise RuntimeError(f"reextract did not finish: {run['stdout']}")
            again = llm.stats()
        finally:
            up.send_signal(signal.SIGINT)
            up.wait(180)
    result = json.loads(run["stdout"])
    chats = calls_made(live)["chat"], calls_made(again)["chat"]
    if result["current_memories"] < users or chats[0] != chats[1]:
        raise RuntimeError(f"not the same work: {result}; chat calls live, again: {chats}")
    return {
        "users": users,
        "snapshots": users,
        "chat_seconds": CHAT_SECONDS,
        "llm_calls": {"live": calls_made(live), "reextract": calls_made(again)},
        "live": {
            "seconds": round(live_seconds, 2),
            "llm_busy_seconds": round(busy_span(live), 2),
            "snapshots_per_second": round(users / live_seconds, 2),
        },
        "reextract": {
            "seconds": result["seconds"],
            "llm_busy_seconds": round(busy_span(again), 2),
            "snapshots_per_second": round(users / result["seconds"], 2),
            "result": result,
        },
        "reextract_over_live": round(live_seconds / result["seconds"], 3),
        "reextract_over_live_llm_busy": round(busy_span(live) / busy_span(again), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("bench/reextract_rate.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reextract-rate-") as scratch:
        result = measure(Path(scratch), args.users)
    result["machine"] = machine()
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))


if __name__ == "__main__":
    main()
