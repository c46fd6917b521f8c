"""What a memstream process counts, for Prometheus (docs/operations.md: every metric, and the
Grafana dashboard in `docs/grafana-dashboard.json`).

Each worker serves its own registry on its own port (`memstream.runtime.observability`); the stages
record here through small functions so that `streams/` keeps wiring, not bookkeeping. Label
values are bounded: stage and memory type names, topics, models, and a dead letter's *kind*
(the exception's name or the refusal's first words), never a record's content or position.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from typing import Any

from prometheus_client import Counter as _Counter
from prometheus_client import Gauge as _Gauge
from prometheus_client import Histogram as _Histogram
from prometheus_client import Info as _Info

MEASURED = os.environ.get("MEMSTREAM_METRICS", "on").strip().lower() not in ("off", "false", "0")
"""`MEMSTREAM_METRICS=off` makes every metric below a no-op (read once, at import: the
setting `operations.metrics`); the benchmark of their cost compares the two."""


class _Unmeasured:
    """A metric that counts nothing (`MEMSTREAM_METRICS=off`)."""

    def labels(self, *_: object, **__: object) -> _Unmeasured:
        return self

    def inc(self, *_: object) -> None: ...
    def dec(self, *_: object) -> None: ...
    def set(self, *_: object) -> None: ...
    def observe(self, *_: object) -> None: ...
    def info(self, *_: object) -> None: ...


def _measured(kind: Any, *args: Any, **kwargs: Any) -> Any:
    """A metric of `kind`, or a no-op one when metrics are off."""
    return kind(*args, **kwargs) if MEASURED else _Unmeasured()


Counter = partial(_measured, _Counter)
Gauge = partial(_measured, _Gauge)
Histogram = partial(_measured, _Histogram)
Info = partial(_measured, _Info)

WORKER = Info("memstream_worker", "The stage this process runs")
RECORDS_IN = Counter(
    "memstream_records_in_total",
    "Input records a stage admitted (redeliveries left out)",
    ["stage"],
)
RECORDS_OUT = Counter(
    "memstream_records_out_total", "Records written to the log, acknowledged", ["topic"]
)
OUTAGE_RETRIES = Counter(
    "memstream_outage_retries_total",
    "Calls retried through an outage of the broker, the database or the LLM",
    ["error"],
)
DEAD_LETTERS = Counter(
    "memstream_dead_letters_total", "Input records set aside as poison", ["stage", "kind"]
)
CONSUMER_LAG = Gauge(
    "memstream_consumer_lag_records",
    "Records of an input partition not applied yet (the partition's end minus the next offset "
    "to apply)",
    ["stage", "topic", "partition"],
)
PROMOTIONS = Counter("memstream_window_promotions_total", "Snapshots promoted", ["reason"])
PROMOTE_LATENCY = Histogram(
    "memstream_window_promote_latency_seconds",
    "Event time from a snapshot's last turn to its promotion",
    ["reason"],
    buckets=(0.1, 1, 5, 30, 60, 300, 600, 1_800, 3_600, 21_600, 86_400),
)
EXTRACTION_SECONDS = Histogram(
    "memstream_extraction_seconds",
    "Wall time from taking a snapshot to its result written, per memory type",
    ["memory_type"],
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
LLM_CALLS = Counter(
    "memstream_llm_calls_total", "LLM calls, by outcome", ["memory_type", "model", "outcome"]
)
LLM_TOKENS = Counter(
    "memstream_llm_tokens_total",
    "LLM tokens as the endpoint counted them",
    ["memory_type", "model", "kind"],
)
LLM_RETRIES = Counter(
    "memstream_llm_retries_total",
    "LLM calls repeated because an answer was invalid",
    ["memory_type", "model"],
)
LLM_IN_FLIGHT = Gauge(
    "memstream_llm_calls_in_flight", "LLM calls running now", ["memory_type", "model"]
)
LLM_SECONDS = Histogram(
    "memstream_llm_call_seconds",
    "Wall time of one LLM call",
    ["memory_type", "model"],
    buckets=(0.05, 0.25, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
LLM_BUDGET_WAITING = Gauge(
    "memstream_llm_budget_waiting_snapshots",
    "Snapshots waiting because their user spent the day's LLM token budget",
    ["memory_type"],
)
LLM_BUDGET_EXCEEDED = Counter(
    "memstream_llm_budget_exceeded_total",
    "Snapshots that had to wait for their user's LLM token budget",
    ["memory_type"],
)
PROJECTOR_BATCH = Histogram(
    "memstream_projector_batch_records",
    "Records per projected batch",
    buckets=(1, 5, 10, 25, 50, 100, 250, 500),
)
PROJECTOR_WRITE_SECONDS = Histogram(
    "memstream_projector_write_seconds",
    "Wall time to write one batch into the read model",
    buckets=(0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
HTTP_REQUESTS = Counter(
    "memstream_http_requests_total", "HTTP API requests", ["route", "method", "status"]
)
HTTP_SECONDS = Histogram(
    "memstream_http_request_seconds", "HTTP API request time", ["route", "method"]
)

_FIRST_WORDS = re.compile(r"[A-Za-z_][\w ]{0,40}")


def dead_letter_kind(reason: str) -> str:
    """A bounded label for a dead letter's reason: the exception's name when the reason names
    one (`window failed: ValueError(...)` → `ValueError`), else its first words."""
    failed = re.search(r"failed: (\w+)\(", reason)
    if failed:
        return failed.group(1)
    words = _FIRST_WORDS.match(reason.strip())
    return words.group(0).strip().lower().replace(" ", "_") if words else "unknown"


def promoted(reason: str, last_turn_at: datetime, promoted_at: datetime) -> None:
    PROMOTIONS.labels(reason).inc()
    latency = max(0.0, (promoted_at - last_turn_at).total_seconds())
    PROMOTE_LATENCY.labels(reason).observe(latency)


@contextmanager
def timed(histogram: Any) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        histogram.observe(time.perf_counter() - started)
