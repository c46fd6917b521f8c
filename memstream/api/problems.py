"""Errors as RFC 9457 problem details, and the request size limit.

Every error the API answers is ``application/problem+json``: ``type``, ``title``, ``status``,
``detail`` and ``instance`` (the request path); a validation error adds ``errors``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import orjson
import pydantic
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from handlers.failures import is_outage
from handlers.identity import Refused
from handlers.messages import InvalidMessageError
from memstream.api.keys import InvalidKey, RateLimited
from memstream.sdk.client import MemoryNotFound
from memstream.sdk.memory_types import UnknownMemoryType

log = logging.getLogger(__name__)
PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://memstream.dev/problems/"
"""Problem types are documented in docs/http-and-mcp.md (errors); the URIs identify them."""


class Problem(BaseModel):
    """An RFC 9457 problem details object."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[dict[str, Any]] | None = None


class ApiProblem(Exception):
    """Raised by an endpoint to answer with a problem."""

    def __init__(self, status: int, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.detail = detail


def problem(
    request: Request,
    status: int,
    kind: str,
    detail: str,
    *,
    errors: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    body: dict[str, Any] = {
        "type": TYPE_BASE + kind,
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": request.url.path,
    }
    if errors is not None:
        body["errors"] = errors
    return Response(
        orjson.dumps(body, default=str), status, headers=headers, media_type=PROBLEM_JSON
    )


OUTAGE_RETRY_AFTER_SECONDS = 5
"""What a 503 asks the caller to wait: the pipeline's own retries start at half a second."""


def install(app: FastAPI) -> None:
    """Answer every error of `app` as a problem."""

    @app.exception_handler(ApiProblem)
    async def api_problem(request: Request, exc: ApiProblem) -> Response:
        return problem(request, exc.status, exc.kind, exc.detail)

    @app.exception_handler(InvalidKey)
    async def invalid_key(request: Request, exc: InvalidKey) -> Response:
        headers = {"WWW-Authenticate": "Bearer"}
        return problem(request, 401, "unauthenticated", str(exc), headers=headers)

    @app.exception_handler(RateLimited)
    async def rate_limited(request: Request, exc: RateLimited) -> Response:
        headers = {"Retry-After": str(exc.retry_after)}
        return problem(request, 429, "rate-limited", str(exc), headers=headers)

    @app.exception_handler(Refused)
    async def refused(request: Request, exc: Refused) -> Response:
        return problem(request, 403, "forbidden-user", str(exc))

    @app.exception_handler(MemoryNotFound)
    async def memory_not_found(request: Request, exc: MemoryNotFound) -> Response:
        return problem(request, 404, "memory-not-found", str(exc))

    @app.exception_handler(UnknownMemoryType)
    async def unknown_memory_type(request: Request, exc: UnknownMemoryType) -> Response:
        return problem(request, 422, "unknown-memory-type", str(exc))

    @app.exception_handler(InvalidMessageError)
    async def invalid_message(request: Request, exc: InvalidMessageError) -> Response:
        return problem(request, 422, "invalid-message", str(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        errors = [_error(e) for e in exc.errors()]
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors[:5])
        return problem(request, 422, "invalid-request", detail, errors=errors)

    @app.exception_handler(pydantic.ValidationError)
    async def invalid_content(request: Request, exc: pydantic.ValidationError) -> Response:
        errors = [_error(e) for e in exc.errors()]
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors[:5])
        return problem(request, 422, "invalid-content", detail, errors=errors)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        kinds = {404: "not-found", 413: "request-too-large"}
        kind = kinds.get(exc.status_code, "http-error")
        return problem(request, exc.status_code, kind, str(exc.detail), headers=exc.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        if is_outage(exc):  # the broker or MongoDB (the read model, the data keys) is down
            log.warning("outage on %s: %r", request.url.path, exc)
            detail = f"a service memstream needs is unavailable ({type(exc).__name__}); retry"
            headers = {"Retry-After": str(OUTAGE_RETRY_AFTER_SECONDS)}
            return problem(request, 503, "unavailable", detail, headers=headers)
        log.exception("unexpected error on %s", request.url.path)
        return problem(request, 500, "internal-error", f"{type(exc).__name__}")


def _error(error: Any) -> dict[str, Any]:
    return {
        "loc": list(error.get("loc", ())),
        "msg": str(error.get("msg", "")),
        "type": str(error.get("type", "")),
    }


class BodyLimit:
    """Refuse request bodies over `max_bytes` with 413: at once when `Content-Length` says so,
    otherwise (chunked uploads) as soon as the body read so far is over the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    # an HTTPException: FastAPI turns anything else raised while it reads the
                    # body into a 400
                    raise HTTPException(413, self._detail())
            return message

        await self.app(scope, limited, send)

    def _detail(self) -> str:
        return f"the request body is over the limit of {self.max_bytes} bytes"

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(
            Request(scope),
            413,
            "request-too-large",
            self._detail(),
        )
        await response(scope, receive, send)
