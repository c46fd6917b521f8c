"""Freshness: how long after a session's flush its memories can be found by search.

    python -m bench freshness [--quick] [--brokers apache,tansu] [--local-model small|large|none]

On each broker, the whole pipeline runs as `memstream up` runs it (`bench.live_pipeline`: the
window, the four memory-type stages and the projector as worker processes; the LLM is
`bench.timed_llm`, scripted answers after `CHAT_DELAY` seconds, every request timed). One
session at a time: record four turns carrying the session's token, then

- **memstream**: `MemoryClient.flush`, then `ReadModel.search` every `POLL` seconds until it
  returns the session's memory: flush → searchable. The LLM requests about the session (told
  apart by its token, timed at the LLM server) give the LLM time; the rest is the pipeline's
  (three hops through the log, the stages' commits, the projection, the poll);
- **baseline**: the same handlers called directly in this process on the same turns — the
  extraction request (`handlers.extraction.base.extract`), the embedding request, the
  reconciliation (`handlers.reconcile`) — with the same LLM server: what any design must spend
  before a memory exists, with no log, no workers and no database.

Which side runs first alternates from session to session; one warm-up session of each is not
counted. With a local model (`--local-model small|large`), also a few sessions on the first
broker with the chat requests forwarded to the real llama.cpp model (under the machine's llama
lock): flush → searchable against the model's own time.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from bench.core import BenchContext, Figure, SuiteResult, alternate, percentile
from bench.live_pipeline import (
    CHAT_DELAY,
    EMBED_DELAY,
    LivePipeline,
    live_pipeline,
    local_model_available,
)
from bench.live_pipeline import local_model as start_local_model
from bench.timed_llm import llm_seconds
from events.memories import Provenance
from events.snapshots import SnapshotPromoted, SnapshotTurn, snapshot_id
from handlers.extraction.base import extract
from handlers.extraction.registry import extractor_for
from handlers.extraction.results import snapshot_source
from handlers.ports import ChatModel, Embedder
from handlers.reconcile import NewMemory, Thresholds, reconcile
from memstream.config import Settings
from memstream.providers.clients import chat_model, embedder
from memstream.sdk.client import MemoryClient
from memstream.sdk.read_model import ReadModel
from streams.settings import utc_now

POLL = 0.02
"""Seconds between two searches while waiting for a session's memory."""
QUERY = "what is the user's locker code?"


def new_token() -> str:
    return "zq" + secrets.token_hex(4)


def conversation(token: str) -> list[dict[str, str]]:
    """A four-turn session whose one fact carries `token`."""
    return [
        {"role": "user", "content": "Hi! I just joined the climbing gym downtown."},
        {"role": "assistant", "content": "Congratulations! How do you like it so far?"},
        {"role": "user", "content": f"Love it. My locker code there is {token}, remember it."},
        {"role": "assistant", "content": "Noted, I will remember your locker code."},
    ]


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p95": percentile(values, 95)}


def split(totals: Sequence[float], llm: Sequence[float]) -> dict[str, Any]:
    """p50/p95 of flush → searchable, of the LLM time and of the rest, and the LLM's share of
    the total (all sessions' LLM seconds over all sessions' seconds)."""
    rest = [total - inside for total, inside in zip(totals, llm, strict=True)]
    return {
        "total": summary(totals),
        "llm": summary(llm),
        "overhead": summary(rest),
        "llm_share": sum(llm) / sum(totals) if sum(totals) else 0.0,
    }


class Session:
    """One user's session: its own user id (no other memories to reconcile with) and token."""

    def __init__(self) -> None:
        self.token = new_token()
        self.user_id = f"fresh-{self.token}"
        self.session_id = "s1"
        self.messages = conversation(self.token)


async def searchable(
    reads: ReadModel,
    session: Session,
    vector: Sequence[float],
    model: str,
    *,
    timeout: float,
    needs_token: bool = True,
) -> float | None:
    """The monotonic time search first returned the session's memory (None: not in time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hits = await reads.search(session.user_id, QUERY, vector, model, limit=5)
        if any(not needs_token or session.token in str(hit.get("text")) for hit in hits):
            return time.monotonic()
        await asyncio.sleep(POLL)
    return None


async def through_pipeline(
    client: MemoryClient,
    reads: ReadModel,
    vector: Sequence[float],
    model: str,
    *,
    timeout: float = 120.0,
    needs_token: bool = True,
) -> tuple[Session, float | None]:
    """Record a session, flush it, wait until it is searchable: (session, seconds or None)."""
    session = Session()
    await client.record(session.user_id, session.session_id, session.messages)
    flushed = time.monotonic()
    await client.flush(session.user_id, session.session_id)
    found = await searchable(
        reads, session, vector, model, timeout=timeout, needs_token=needs_token
    )
    return session, None if found is None else found - flushed


async def in_process(
    settings: Settings, llm: ChatModel, embedding: Embedder
) -> tuple[Session, float]:
    """The baseline: the stage's handlers on the same turns, called here (see the module doc),
    with the LLM and embedding clients made once, as a stage makes them."""
    session = Session()
    started = time.monotonic()
    now = utc_now()
    turns = tuple(
        SnapshotTurn(turn_id=str(uuid.uuid4()), occurred_at=now, **message)  # type: ignore[arg-type]
        for message in session.messages
    )
    snapshot = SnapshotPromoted(
        event_id=snapshot_id(session.user_id, session.session_id, [t.turn_id for t in turns]),
        occurred_at=now,
        user_id=session.user_id,
        session_id=session.session_id,
        seq=0,
        reason="flush",
        turns=turns,
    )
    extractor = extractor_for("semantic")
    outcome = await extract(extractor, snapshot, llm)
    texts = [memory.text for memory in outcome.memories]
    vectors = await asyncio.to_thread(embedding.embed, texts) if texts else []
    stamp = Provenance(
        prompt_version=extractor.prompt_version,
        llm_model=settings.llm.model or "",
        embedding_model=embedding.model_name,
        embedding_dimensions=embedding.dimension,
    )
    reconcile_settings = settings.memory.reconcile
    result = await reconcile(
        "semantic",
        [NewMemory(c, tuple(v)) for c, v in zip(outcome.memories, vectors, strict=True)],
        [],
        source=snapshot_source(snapshot),
        provenance=stamp,
        thresholds=Thresholds(
            reinforce=reconcile_settings.reinforce_threshold,
            ask=reconcile_settings.ask_threshold,
            max_options=reconcile_settings.max_options,
        ),
        ask=_never_asked,
    )
    if not result.events:
        raise RuntimeError(f"the in-process baseline found no memory in {session.token}")
    return session, time.monotonic() - started


async def _never_asked(*_: Any) -> list[None]:
    raise AssertionError("a new user has no memory to ask about")


async def measure(live: LivePipeline, sessions: int) -> dict[str, Any]:
    settings = live.settings
    reads = ReadModel(settings.mongodb.uri or "", settings.mongodb.database)
    query_embedder = embedder(settings.embedding, settings.llm)
    (vector,) = await asyncio.to_thread(query_embedder.embed, [QUERY])
    llm = chat_model(settings.llm)
    rows: dict[str, list[dict[str, Any]]] = {"memstream": [], "baseline": []}
    try:
        async with MemoryClient(settings) as client:
            for index, baseline_first in alternate(sessions + 1):
                sides = ("baseline", "memstream") if baseline_first else ("memstream", "baseline")
                for side in sides:
                    if side == "memstream":
                        session, seconds = await through_pipeline(
                            client, reads, vector, query_embedder.model_name
                        )
                        if seconds is None:
                            raise RuntimeError(f"session {session.token} not searchable in time")
                    else:
                        session, seconds = await in_process(settings, llm, query_embedder)
                    rows[side].append(
                        {"token": session.token, "seconds": seconds, "warm_up": index == 0}
                    )
    finally:
        await reads.close()
    entries = live.llm.entries()
    for side_rows in rows.values():
        for row in side_rows:
            row["llm_seconds"] = llm_seconds(entries, row["token"])
    return rows


def figures_for(setting: str, rows: dict[str, list[dict[str, Any]]]) -> tuple[list[Figure], Any]:
    counted = {side: [r for r in side_rows if not r["warm_up"]] for side, side_rows in rows.items()}
    ours = split(
        [r["seconds"] for r in counted["memstream"]],
        [r["llm_seconds"] for r in counted["memstream"]],
    )
    base = split(
        [r["seconds"] for r in counted["baseline"]], [r["llm_seconds"] for r in counted["baseline"]]
    )
    name = "same handlers called in-process (no log, workers, database)"
    figures = [
        Figure(
            "freshness flush→searchable p50",
            setting,
            "s",
            ours["total"]["p50"],
            base["total"]["p50"],
            name,
        ),
        Figure(
            "freshness flush→searchable p95",
            setting,
            "s",
            ours["total"]["p95"],
            base["total"]["p95"],
            name,
        ),
        Figure(
            "freshness LLM share",
            setting,
            "%",
            100 * ours["llm_share"],
            note=f"LLM time p50 {ours['llm']['p50']:.2f} s of {ours['total']['p50']:.2f} s",
        ),
        Figure(
            "freshness pipeline overhead p50",
            setting,
            "s",
            ours["overhead"]["p50"],
            note="flush→searchable minus the time inside LLM requests",
        ),
        Figure("freshness pipeline overhead p95", setting, "s", ours["overhead"]["p95"]),
    ]
    return figures, {"memstream": ours, "baseline": base}


async def measure_local(live: LivePipeline, sessions: int, timeout: float) -> list[dict[str, Any]]:
    """Sessions through the pipeline with the chat requests answered by the real model."""
    settings = live.settings
    reads = ReadModel(settings.mongodb.uri or "", settings.mongodb.database)
    query_embedder = embedder(settings.embedding, settings.llm)
    (vector,) = await asyncio.to_thread(query_embedder.embed, [QUERY])
    rows: list[dict[str, Any]] = []
    try:
        async with MemoryClient(settings) as client:
            for _ in range(sessions):
                session, seconds = await through_pipeline(
                    client,
                    reads,
                    vector,
                    query_embedder.model_name,
                    timeout=timeout,
                    needs_token=False,
                )
                rows.append({"token": session.token, "seconds": seconds})
    finally:
        await reads.close()
    entries = live.llm.entries()
    for row in rows:
        row["llm_seconds"] = llm_seconds(entries, row["token"], kinds=("chat",))
        row["embedding_seconds"] = llm_seconds(entries, row["token"], kinds=("embeddings",))
    return rows


def run_local(context: BenchContext, size: str) -> tuple[list[Figure], dict[str, Any]]:
    kind = context.brokers[0]
    live = live_pipeline(context, kind)
    sessions = 2 if context.quick else 4
    with (
        start_local_model(size, context.workdir / "freshness-local") as server,
        live.llm.forwarding(server.base_url, server.model),
    ):
        rows = asyncio.run(measure_local(live, sessions + 1, timeout=300.0))
    counted = [r for r in rows[1:] if r["seconds"] is not None]
    raw: dict[str, Any] = {"model": server.model, "broker": kind, "sessions": rows}
    if not counted:
        raw["error"] = "no session's memory became searchable (the model extracted nothing?)"
        return [], raw
    totals = [r["seconds"] for r in counted]
    inside = [r["llm_seconds"] for r in counted]
    result = split(totals, inside)
    raw["summary"] = result
    setting = f"{kind}, local {server.model} ({len(counted)} sessions)"
    figures = [
        Figure(
            "freshness flush→searchable p50",
            setting,
            "s",
            result["total"]["p50"],
            result["llm"]["p50"],
            "time inside the model's requests (p50)",
        ),
        Figure(
            "freshness LLM share",
            setting,
            "%",
            100 * result["llm_share"],
            note=f"pipeline overhead p50 {result['overhead']['p50']:.2f} s",
        ),
    ]
    return figures, raw


def run(context: BenchContext) -> SuiteResult:
    sessions = 5 if context.quick else 30
    figures: list[Figure] = []
    raw: dict[str, Any] = {
        "sessions": sessions,
        "chat_delay": CHAT_DELAY,
        "embed_delay": EMBED_DELAY,
        "poll_seconds": POLL,
    }
    for kind in context.brokers:
        live = live_pipeline(context, kind)
        rows = asyncio.run(measure(live, sessions))
        setting = f"{kind}, scripted LLM ({CHAT_DELAY:g} s a chat)"
        found, summaries = figures_for(setting, rows)
        figures += found
        raw[kind] = {
            "pipeline_start_seconds": live.start_seconds,
            "summary": summaries,
            "sessions": rows,
        }
    # The quick (CI) profile runs a local model only in the extraction_time suite.
    size = "none" if context.quick else str(context.options.get("local_model", "none"))
    missing = local_model_available(size)
    if missing is None:
        local_figures, raw["local_model"] = run_local(context, size)
        figures += local_figures
    else:
        raw["local_model"] = {"skipped": missing}
    return SuiteResult(figures, raw)


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["freshness", *sys.argv[1:]]))
