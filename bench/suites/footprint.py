"""Footprint: resident memory (RSS) of every process of a running memstream, idle and under load.

    python -m bench footprint [--quick] [--brokers apache,tansu] [--local-model small|large|none]

On each broker, with the whole pipeline running (`bench.live_pipeline`, shared with the
freshness suite): each stage worker, the broker, the database and the LLM server (the scripted
`bench.timed_llm`; its own process) are sampled every `INTERVAL` seconds (`bench.rss`, psutil,
a process with its children):

- **idle**: nothing flows for `IDLE_SECONDS`; the median of the samples;
- **under load**: sessions of four turns are recorded and flushed as fast as the SDK sends them,
  and sampled until the last one's memory is searchable; the largest sample.

`total` adds the components up (under load: their peaks, which need not coincide). With a local
model (`--local-model small|large`), its llama.cpp server is measured too, under the machine's
llama lock: idle once loaded, and while the pipeline's chat requests of a few sessions go to it.
No baseline: these are absolute figures (MB, 10^6 bytes).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from bench.core import BenchContext, BrokerKind, Figure, SuiteResult
from bench.live_pipeline import (
    LivePipeline,
    live_pipeline,
    local_model,
    local_model_available,
)
from bench.rss import RssSampler, idle_and_peak
from bench.suites.freshness import QUERY, Session, searchable
from memstream.providers.clients import embedder
from memstream.sdk.client import MemoryClient
from memstream.sdk.read_model import ReadModel

INTERVAL = 0.25


async def flow(live: LivePipeline, sessions: int, timeout: float) -> dict[str, Any]:
    """Record and flush `sessions` sessions back to back, then wait until the last is
    searchable (the stages work through them in order per partition; the last one's memory
    appearing is close to the end of the backlog)."""
    settings = live.settings
    reads = ReadModel(settings.mongodb.uri or "", settings.mongodb.database)
    query_embedder = embedder(settings.embedding, settings.llm)
    (vector,) = await asyncio.to_thread(query_embedder.embed, [QUERY])
    started = time.monotonic()
    try:
        async with MemoryClient(settings) as client:
            batch = [Session() for _ in range(sessions)]
            for session in batch:
                await client.record(session.user_id, session.session_id, session.messages)
                await client.flush(session.user_id, session.session_id)
            sent = time.monotonic() - started
            for session in batch:
                found = await searchable(
                    reads, session, vector, query_embedder.model_name, timeout=timeout
                )
                if found is None:
                    raise RuntimeError(f"session {session.token} not searchable in time")
    finally:
        await reads.close()
    return {"sessions": sessions, "send_seconds": sent, "seconds": time.monotonic() - started}


def components(context: BenchContext, kind: BrokerKind, live: LivePipeline) -> dict[str, int]:
    servers = context.server_pids()
    pids = {f"worker {stage}": pid for stage, pid in live.worker_pids().items()}
    pids["broker"] = servers[kind]
    pids["database"] = servers["mongo"]
    if live.llm.pid is not None:
        pids["LLM server (scripted)"] = live.llm.pid
    return pids


def figures_for(setting: str, idle: dict[str, float], load: dict[str, float]) -> list[Figure]:
    figures = []
    for name in idle:
        figures.append(Figure("footprint idle", f"{setting}, {name}", "MB", idle[name]))
    for name in load:
        figures.append(Figure("footprint under load", f"{setting}, {name}", "MB", load[name]))
    return figures


def measure_broker(
    context: BenchContext, kind: BrokerKind, idle_seconds: float, sessions: int
) -> tuple[list[Figure], dict[str, Any]]:
    live = live_pipeline(context, kind)
    pids = components(context, kind, live)
    with RssSampler(pids, INTERVAL) as idle_sampler:
        time.sleep(idle_seconds)
    with RssSampler(pids, INTERVAL) as load_sampler:
        workload = asyncio.run(flow(live, sessions, timeout=120.0))
    idle = idle_and_peak(idle_sampler.samples, peak=False)
    load = idle_and_peak(load_sampler.samples, peak=True)
    raw = {
        "pids": pids,
        "idle": idle,
        "load": load,
        "workload": workload,
        "idle_samples": idle_sampler.samples,
        "load_samples": load_sampler.samples,
    }
    return figures_for(kind, idle, load), raw


def measure_local_model(
    context: BenchContext, size: str, idle_seconds: float
) -> tuple[list[Figure], dict[str, Any]]:
    """The llama.cpp server: idle once loaded, and while it answers the pipeline's extraction
    requests for two sessions (chat forwarded by the scripted server)."""
    live = live_pipeline(context, context.brokers[0])
    with local_model(size, context.workdir / "footprint-local") as server:
        assert server.pid is not None
        pids = {"LLM server (llama.cpp)": server.pid}
        with RssSampler(pids, INTERVAL) as idle_sampler:
            time.sleep(idle_seconds)
        with (
            live.llm.forwarding(server.base_url, server.model),
            RssSampler(pids, INTERVAL) as load_sampler,
        ):
            workload = asyncio.run(flow_untokened(live, 2, timeout=300.0))
    idle = idle_and_peak(idle_sampler.samples, peak=False)
    load = idle_and_peak(load_sampler.samples, peak=True)
    name = "LLM server (llama.cpp)"
    setting = f"local {server.model}"
    figures = [
        Figure("footprint idle", f"{setting}, {name}", "MB", idle[name]),
        Figure("footprint under load", f"{setting}, {name}", "MB", load[name]),
    ]
    raw = {
        "model": server.model,
        "idle": idle,
        "load": load,
        "workload": workload,
        "idle_samples": idle_sampler.samples,
        "load_samples": load_sampler.samples,
    }
    return figures, raw


async def flow_untokened(live: LivePipeline, sessions: int, timeout: float) -> dict[str, Any]:
    """Sessions answered by the real model: wait until each has a memory (whatever its text)."""
    settings = live.settings
    reads = ReadModel(settings.mongodb.uri or "", settings.mongodb.database)
    query_embedder = embedder(settings.embedding, settings.llm)
    (vector,) = await asyncio.to_thread(query_embedder.embed, [QUERY])
    started = time.monotonic()
    found: list[bool] = []
    try:
        async with MemoryClient(settings) as client:
            for _ in range(sessions):
                session = Session()
                await client.record(session.user_id, session.session_id, session.messages)
                await client.flush(session.user_id, session.session_id)
                at = await searchable(
                    reads,
                    session,
                    vector,
                    query_embedder.model_name,
                    timeout=timeout,
                    needs_token=False,
                )
                found.append(at is not None)
    finally:
        await reads.close()
    return {"sessions": sessions, "searchable": found, "seconds": time.monotonic() - started}


def run(context: BenchContext) -> SuiteResult:
    idle_seconds, sessions = (2.0, 20) if context.quick else (10.0, 80)
    figures: list[Figure] = []
    raw: dict[str, Any] = {"interval": INTERVAL, "idle_seconds": idle_seconds}
    for kind in context.brokers:
        found, raw[kind] = measure_broker(context, kind, idle_seconds, sessions)
        figures += found
    # The quick (CI) profile runs a local model only in the extraction_time suite.
    size = "none" if context.quick else str(context.options.get("local_model", "none"))
    missing = local_model_available(size)
    if missing is None:
        local_figures, raw["local_model"] = measure_local_model(context, size, idle_seconds)
        figures += local_figures
    else:
        raw["local_model"] = {"skipped": missing}
    return SuiteResult(figures, raw)


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["footprint", *sys.argv[1:]]))
