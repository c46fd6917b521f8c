"""A worker's metrics and health over HTTP, for Prometheus and Kubernetes probes
(docs/operations.md, "Metrics, probes and draining").

One small server per process, on `MEMSTREAM_METRICS_PORT` (`memstream up` gives each worker a
port of its own and `memstream status` lists them):

* `/metrics` — the process's Prometheus registry (`streams.metrics`);
* `/healthz` — liveness: 200 while the worker's event loop keeps ticking (a stage's timer
  beats every `BEAT_SECONDS`), 503 once it has not for `STALE_SECONDS` (a hung loop);
* `/readyz` — readiness: 200 once the worker joined its consumer group and recovered its
  tables (Faust's rebalance completed), 503 from a rebalance's start until it completes again,
  and while it drains at shutdown.

The server runs in a thread (prometheus_client's WSGI app and the standard library's server):
a scrape never waits on the stage's event loop, and a hung loop still answers `/healthz`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app

BEAT_SECONDS = 5.0
STALE_SECONDS = 60.0


@dataclass
class Health:
    """What the probes answer from; the stage's app updates it (`watch_app`)."""

    clock: Callable[[], float] = time.monotonic
    ready: bool = False
    draining: bool = False
    last_beat: float = field(default_factory=time.monotonic)

    def beat(self) -> None:
        self.last_beat = self.clock()

    @property
    def live(self) -> bool:
        return self.clock() - self.last_beat < STALE_SECONDS

    @property
    def serving(self) -> bool:
        return self.ready and not self.draining


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every few seconds would fill the worker's log."""


def probes_app(health: Health) -> Callable[..., Iterable[bytes]]:
    """The WSGI app: `/healthz`, `/readyz`, and Prometheus' own app for the rest."""
    metrics = make_wsgi_app()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("/healthz", "/readyz"):
            ok = health.live if path == "/healthz" else health.serving and health.live
            start_response(
                "200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")]
            )
            return [b"ok\n" if ok else b"not ready\n"]
        return metrics(environ, start_response)  # type: ignore[no-any-return]

    return app


def serve_probes(health: Health, port: int, host: str = "127.0.0.1") -> WSGIServer:
    """Serve the probes and metrics on `host:port` from a daemon thread."""
    server = make_server(host, port, probes_app(health), handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, name="probes", daemon=True)
    thread.start()
    return server


def watch_app(app: Any, health: Health, stage: str) -> None:
    """Keep `health` up to date from a stage's Faust app: a timer beats, the rebalance signals
    flip readiness, shutdown starts the drain."""
    from streams.metrics import WORKER

    WORKER.info({"stage": stage})

    async def beat() -> None:
        health.beat()

    async def revoked(sender: Any, *_: Any, **__: Any) -> None:
        health.ready = False

    async def assigned(sender: Any, *_: Any, **__: Any) -> None:
        health.ready = True

    async def draining(sender: Any, *_: Any, **__: Any) -> None:
        health.draining = True

    app.timer(BEAT_SECONDS)(beat)
    app.on_partitions_revoked.connect(revoked)
    app.on_rebalance_complete.connect(assigned)
    app.on_before_shutdown.connect(draining)
