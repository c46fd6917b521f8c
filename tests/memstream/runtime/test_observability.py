"""A worker's probes: readiness flips with rebalances and at shutdown, liveness with the event
loop's beat; the probe server answers from its own thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from memstream.runtime.observability import STALE_SECONDS, Health, serve_probes, watch_app


class Signal:
    def __init__(self) -> None:
        self.handlers: list[Callable[..., Any]] = []

    def connect(self, handler: Callable[..., Any]) -> None:
        self.handlers.append(handler)

    def send(self, *args: Any) -> None:
        for handler in self.handlers:
            asyncio.run(handler(self, *args))


class FakeApp:
    """The parts of a Faust app `watch_app` uses."""

    def __init__(self) -> None:
        self.timers: list[Callable[[], Any]] = []
        self.on_partitions_revoked = Signal()
        self.on_rebalance_complete = Signal()
        self.on_before_shutdown = Signal()

    def timer(self, seconds: float) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
        def register(function: Callable[[], Any]) -> Callable[[], Any]:
            self.timers.append(function)
            return function

        return register


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_readiness_flips_with_rebalances_and_the_drain() -> None:
    app, clock = FakeApp(), Clock()
    health = Health(clock=clock, last_beat=clock.now)
    watch_app(app, health, "window")
    server = serve_probes(health, 0)
    address = f"http://127.0.0.1:{server.server_port}"
    try:

        def probe(path: str) -> int:
            return httpx.get(address + path, timeout=5).status_code

        assert (probe("/healthz"), probe("/readyz")) == (200, 503)  # not joined yet
        app.on_rebalance_complete.send()
        assert probe("/readyz") == 200
        app.on_partitions_revoked.send({"tp"})  # a rebalance begins
        assert probe("/readyz") == 503
        app.on_rebalance_complete.send()
        assert probe("/readyz") == 200
        clock.now += STALE_SECONDS + 1  # the loop stopped beating
        assert (probe("/healthz"), probe("/readyz")) == (503, 503)
        (beat,) = app.timers
        asyncio.run(beat())
        assert (probe("/healthz"), probe("/readyz")) == (200, 200)
        app.on_before_shutdown.send()
        assert (probe("/healthz"), probe("/readyz")) == (200, 503)
        assert "memstream_worker_info" in httpx.get(address + "/metrics").text
    finally:
        server.shutdown()


def test_the_grafana_dashboard_plots_only_metrics_memstream_exports() -> None:
    """Every metric name a panel of docs/grafana-dashboard.json queries is one of
    `streams.metrics` (histogram series by their `_bucket` / counters by `_total`)."""
    import json
    import re
    from pathlib import Path

    from prometheus_client import REGISTRY

    import streams.metrics  # noqa: F401 - registers the metrics

    suffixes = {
        "counter": ["_total"],
        "histogram": ["_bucket", "_count", "_sum"],
        "info": ["_info"],
    }
    exported = {
        family.name + suffix
        for family in REGISTRY.collect()
        if family.name.startswith("memstream_")
        for suffix in suffixes.get(family.type, [""])
    }
    dashboard = json.loads(Path("docs/grafana-dashboard.json").read_text())
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"memstream_\w+", target["expr"])
    }
    assert queried and queried <= exported, queried - exported
    families = {name for name in exported if name.startswith("memstream_")}
    plotted = {re.sub(r"_(bucket|total)$", "", name) for name in queried}
    assert {re.sub(r"_(bucket|count|sum|total|info)$", "", n) for n in families} - plotted <= {
        "memstream_worker"
    }
