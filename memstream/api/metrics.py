"""The HTTP API's own metrics and probes: requests by route and status (`streams.metrics`),
`/metrics` for Prometheus, `/healthz` and `/readyz` for orchestrators (docs/operations.md).

Routes are counted by their template (`/v1/users/{user_id}/memories`), never by the path a
caller sent, so user ids never become label values.
"""

from __future__ import annotations

import time

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from streams.metrics import HTTP_REQUESTS, HTTP_SECONDS


class RequestMetrics:
    """Count every HTTP request by route template, method and status, and time it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            route = scope.get("route")
            name = getattr(route, "path", None) or "unmatched"
            method = str(scope.get("method", ""))
            HTTP_REQUESTS.labels(name, method, str(status)).inc()
            HTTP_SECONDS.labels(name, method).observe(time.perf_counter() - started)


def install_probes(app: FastAPI) -> None:
    """`/metrics`, `/healthz` (the process answers) and `/readyz` (its SDK client started)."""

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz", include_in_schema=False)
    async def live() -> Response:
        return Response("ok\n", media_type="text/plain")

    @app.get("/readyz", include_in_schema=False)
    async def ready() -> Response:
        started = getattr(app.state, "memory", None) is not None
        return Response(
            "ok\n" if started else "not ready\n",
            status_code=200 if started else 503,
            media_type="text/plain",
        )
