"""What the metrics cost: window throughput and HTTP ingest with every metric counting and
scraped once a second, against the same with metrics off (`MEMSTREAM_METRICS=off`: every
metric a no-op), alternating which goes first from round to round.

    python -m bench metrics [--quick] [--brokers apache,tansu]

- **Window**: the window stage (`memstream worker --stage window`, a child process) over the
  same pre-produced turns as the window suite (`bench.suites.window.window_round`), turns/s
  from its ready marker to the last snapshot received. With metrics on, a thread scrapes its
  `/metrics` every second meanwhile.
- **HTTP ingest**: `POST /v1/turns` requests (one turn each, 8 at a time) against `memstream
  serve` in a child process, requests/s; the request metrics are counted in its middleware, and
  its `/metrics` is scraped every second meanwhile. (The SDK's own producer counts nothing: its
  ingest is the same code either way.)
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx

from bench.core import BenchContext, Figure, SuiteResult, alternate, median
from bench.suites.window import MAX_MESSAGES, SHORT_IDLE, session_turns, window_round
from events.codec import encode
from memstream.api.keys import KeyStore
from memstream.config import Settings, load_settings
from memstream.runtime.pipeline import TANSU_ENVIRONMENT
from memstream.runtime.servers import free_port
from memstream.runtime.topics import ensure_topics

WINDOW_TURNS = (600, 20_000)
"""Turns per window round: quick, full."""
HTTP_REQUESTS = (300, 2_000)


class Scraper:
    """Scrape `url` once a second in a thread until stopped; how many scrapes answered."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                if httpx.get(self.url, timeout=2).status_code == 200:
                    self.answered += 1
            except httpx.HTTPError:
                pass


async def window_side(
    context: BenchContext, kind: str, payloads: list[tuple[bytes, bytes]], measured: bool
) -> dict[str, Any]:
    broker = context.broker(kind)  # type: ignore[arg-type]
    log_dir = context.workdir / "metrics-logs" / kind
    if not measured:
        return await window_round(
            broker.bootstrap_servers, kind, payloads, log_dir, SHORT_IDLE, MEMSTREAM_METRICS="off"
        )
    port = free_port()
    with Scraper(f"http://127.0.0.1:{port}/metrics") as scraper:
        result = await window_round(
            broker.bootstrap_servers, kind, payloads, log_dir, SHORT_IDLE,
            MEMSTREAM_METRICS_PORT=str(port),
        )  # fmt: skip
    return {**result, "scrapes": scraper.answered}


def http_side(context: BenchContext, kind: str, requests: int, measured: bool) -> dict[str, Any]:
    """`memstream serve` (a child process, fresh topics and database) with metrics on or off:
    `requests` turns posted 8 at a time."""
    run = uuid.uuid4().hex[:8]
    config = context.workdir / "metrics-none.yaml"
    config.write_text("# environment only\n")
    environment = {
        "MEMSTREAM_CONFIG": str(config),
        "KAFKA_BOOTSTRAP_SERVERS": context.broker(kind).bootstrap_servers,  # type: ignore[arg-type]
        "MONGODB_URI": context.mongo().uri,
        "MONGODB_DATABASE": f"bench_metrics_{run}",
        "MEMSTREAM_TOPIC_PREFIX": f"bm{run}.",
        "MEMSTREAM_SEAL_CONTENT": "false",
        "MEMSTREAM_METRICS": "on" if measured else "off",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",  # never called: serve only records turns
        "MEMSTREAM_LLM_MODEL": "none",
        **(TANSU_ENVIRONMENT if kind == "tansu" else {}),
    }
    settings = load_settings(environ=environment)
    asyncio.run(ensure_topics(settings.kafka))
    key = asyncio.run(_key(settings))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "memstream", "serve", "--port", str(port)],
        env={**os.environ, **environment},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_ready(url)
        scraper = Scraper(f"{url}/metrics")
        started = time.perf_counter()
        if measured:
            with scraper:
                asyncio.run(_post_turns(url, key, requests))
        else:
            asyncio.run(_post_turns(url, key, requests))
        seconds = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(15)
    result: dict[str, Any] = {"requests": requests, "seconds": seconds, "per_s": requests / seconds}
    if measured:
        result["scrapes"] = scraper.answered
    return result


async def _key(settings: Settings) -> str:
    store = KeyStore(settings.mongodb.uri or "", settings.mongodb.database)
    try:
        key, _ = await store.create("bench", "application", "bench")
        return key
    finally:
        await store.close()


def _wait_ready(url: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"memstream serve at {url} not ready after {timeout:.0f}s")


async def _post_turns(url: str, key: str, requests: int) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    queue: asyncio.Queue[int] = asyncio.Queue()
    for number in range(requests):
        queue.put_nowait(number)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:

        async def worker() -> None:
            while not queue.empty():
                number = queue.get_nowait()
                body = {
                    "user_id": f"m{number % 20}",
                    "session_id": f"s{number % 40}",
                    "messages": [{"role": "user", "content": f"turn {number}"}],
                }
                answer = await client.post("/v1/turns", json=body)
                answer.raise_for_status()

        await asyncio.gather(*(worker() for _ in range(8)))


def _ratio_figures(
    name: str, kind: str, unit: str, sides: dict[str, list[dict[str, Any]]], key: str
) -> Figure:
    on = median([r[key] for r in sides["on"]])
    off = median([r[key] for r in sides["off"]])
    return Figure(
        "metrics",
        f"{name}, {kind}",
        unit,
        round(on, 3),
        baseline=round(off, 3),
        baseline_name="metrics off (MEMSTREAM_METRICS=off), same run",
        note="metrics on: counted and scraped every second",
    )


def _compare(
    label: str, rounds: int, run_side: Callable[[bool], dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    sides: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    for _, off_first in alternate(rounds):
        for side in ("off", "on") if off_first else ("on", "off"):
            result = run_side(side == "on")
            sides[side].append(result)
            shown = {k: round(v, 2) for k, v in result.items() if isinstance(v, float)}
            print(f"   metrics {label} {side}: {shown}", file=sys.stderr, flush=True)
    return sides


def run(context: BenchContext) -> SuiteResult:
    quick = 0 if context.quick else 1
    turns, requests, rounds = WINDOW_TURNS[quick], HTTP_REQUESTS[quick], 1 if context.quick else 4
    records = session_turns(turns, MAX_MESSAGES, datetime.now(UTC))
    payloads = [(record.key.encode(), encode(record)) for record in records]
    figures: list[Figure] = []
    raw: dict[str, Any] = {"window_turns": turns, "http_requests": requests, "rounds": rounds}
    for kind in context.brokers:
        window = _compare(
            f"window {kind}",
            rounds,
            lambda measured, kind=kind: asyncio.run(  # type: ignore[misc]
                window_side(context, kind, payloads, measured)
            ),
        )
        http = _compare(
            f"http {kind}",
            rounds,
            lambda measured, kind=kind: http_side(context, kind, requests, measured),  # type: ignore[misc]
        )
        raw[kind] = {"window": window, "http": http}
        figures.append(_ratio_figures("window throughput", kind, "turns/s", window, "turns_per_s"))
        for side in window.values():
            for result in side:
                result["cpu_per_1000_turns"] = 1000 * result["cpu_seconds"] / turns
        figures.append(
            _ratio_figures(
                "window CPU seconds per 1,000 turns (worker process)",
                kind,
                "s",
                window,
                "cpu_per_1000_turns",
            )
        )
        figures.append(_ratio_figures("HTTP ingest", kind, "requests/s", http, "per_s"))
    return SuiteResult(figures, raw)
