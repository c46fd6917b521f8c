"""The FastAPI application: one endpoint per SDK call, each authorised by an API key.

Endpoints only translate: read the body, let the key decide the memory user
(`Caller.user`), call the SDK acting as the key's principal, answer JSON. Errors are problem
details (`memstream.api.problems`). See docs/architecture.md, "HTTP API and keys".
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, FastAPI, Path, Query
from fastapi.openapi.utils import get_openapi
from fastapi.responses import StreamingResponse

from events.forgetting import MAX_REASON_CHARS
from events.memories import MemoryType
from memstream.api import models as m
from memstream.api.auth import Authenticated, Caller
from memstream.api.consolidations import consolidation_routes
from memstream.api.keys import KeyStore
from memstream.api.mcp_server import build_mcp, http_caller
from memstream.api.metrics import RequestMetrics, install_probes
from memstream.api.paths import IdPath, UserPath
from memstream.api.problems import PROBLEM_JSON, ApiProblem, BodyLimit, Problem, install
from memstream.api.rollbacks import rollback_routes
from memstream.config import Settings
from memstream.sdk.client import MemoryClient

NDJSON = "application/x-ndjson"
UserQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=200,
        pattern=r"^[^\s|\x00-\x1f]+$",
        description="The end user (an application key must name it; ignored for a service "
        "account key).",
    ),
]
Reason = Annotated[
    str,
    Query(max_length=MAX_REASON_CHARS, description="Why (kept on the receipt, never content)."),
]
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "No, an unknown, a revoked or an expired API key"},
    403: {"model": Problem, "description": "The key may not act on this user"},
    413: {"model": Problem, "description": "The request body is over the limit"},
    422: {"model": Problem, "description": "The request is invalid"},
    429: {
        "model": Problem,
        "description": "The key made more requests this minute than its limit (`Retry-After`)",
    },
}


def create_app(settings: Settings, *, memory: MemoryClient | None = None) -> FastAPI:
    """The API over `settings`' pipeline (`memory`: an SDK client to use instead of a new one;
    the app then neither starts nor closes it)."""
    if not settings.mongodb.uri:
        raise ValueError("MONGODB_URI is not set (is `memstream up` running?)")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own = memory is None
        client = memory or MemoryClient(settings)
        keys = KeyStore(settings.mongodb.uri or "", settings.mongodb.database)
        if own:
            await client.start()
        app.state.memory, app.state.keys, app.state.settings = client, keys, settings
        try:
            async with mcp.session_manager.run():
                yield
        finally:
            await keys.close()
            if own:
                await client.close()

    app = FastAPI(
        title="memstream",
        version="1",
        summary="Long-term memory for AI agents: record turns, search and recall memories.",
        lifespan=lifespan,
    )
    install(app)
    app.add_middleware(BodyLimit, max_bytes=settings.http.max_body_bytes)
    app.add_middleware(RequestMetrics)
    install_probes(app)
    app.include_router(_router())
    mcp = build_mcp(http_caller(app.state))
    app.mount("/mcp", mcp.streamable_http_app(streamable_http_path="/", host=settings.http.host))
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _router() -> APIRouter:
    router = APIRouter(prefix="/v1", responses=ERRORS)
    _write_routes(router)
    _read_routes(router)
    _forget_routes(router)
    rollback_routes(router)
    consolidation_routes(router)
    _operations_routes(router)
    return router


def _write_routes(router: APIRouter) -> None:
    """Writes: each appends to the log and answers 202; the stages do the rest."""

    @router.post("/turns", status_code=202, response_model=m.TurnsRecorded, tags=["write"])
    async def record_turns(body: m.RecordTurns, caller: Authenticated) -> Any:
        """Append messages as turns (a fast write; extraction runs later)."""
        user = await caller.user(body.user_id)
        turns = await caller.memory.record(
            user,
            body.session_id,
            body.messages,
            agent_id=body.agent_id,
            occurred_at=body.occurred_at,
        )
        recorded = {
            "user_id": user,
            "session_id": body.session_id,
            "turn_ids": [t.event_id for t in turns],
        }
        return caller.reply(recorded, 202)

    @router.post("/flush", status_code=202, response_model=m.SessionFlushed, tags=["write"])
    async def flush(body: m.FlushSession, caller: Authenticated) -> Any:
        """End a session: its pending turns are promoted to a snapshot now."""
        user = await caller.user(body.user_id)
        await caller.memory.flush(user, body.session_id)
        return caller.reply({"user_id": user, "session_id": body.session_id}, 202)

    @router.post("/saves", status_code=202, response_model=m.MemorySaveAccepted, tags=["write"])
    async def save(body: m.SaveMemory, caller: Authenticated) -> Any:
        """Save a memory directly; it is reconciled like an extracted one."""
        user = await caller.user(body.user_id)
        save_id = await caller.memory.save(
            user,
            body.memory_type,
            body.text,
            subject=body.subject,
            owner=body.owner,
            category=body.category,
            attributes=body.attributes,
            agent_id=body.agent_id,
            session_id=body.session_id,
            expires_at=body.expires_at,
        )
        return caller.reply({"user_id": user, "save_id": save_id}, 202)


def _read_routes(router: APIRouter) -> None:
    """Reads of the read model: search, context, memories, history, profile, events."""

    @router.post("/search", response_model=m.SearchResults, tags=["read"])
    async def search(body: m.Search, caller: Authenticated) -> Any:
        """The user's current memories that best answer the query."""
        user = await caller.user(body.user_id)
        found = await caller.memory.search(
            user, body.query, limit=body.limit, mode=body.mode, **body.filters()
        )
        return caller.reply({"user_id": user, "results": found})

    @router.post("/context", response_model=m.Context, tags=["read"])
    async def build_context(body: m.BuildContext, caller: Authenticated) -> Any:
        """A prompt-ready block: profile, relevant memories, the session so far."""
        user = await caller.user(body.user_id)
        block = await caller.memory.build_context(
            user,
            body.query,
            session_id=body.session_id,
            max_chars=body.max_chars,
            per_type=body.per_type,
            agent_id=body.agent_id,
            past_messages=body.past_messages,
        )
        return caller.reply({"user_id": user, "context": block})

    @router.get("/memories", response_model=m.MemoryPage, tags=["read"])
    async def memories(
        caller: Authenticated,
        user_id: UserQuery = None,
        memory_type: MemoryType | None = None,
        history: bool = False,
        as_of: datetime | None = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,9}$")] = None,
    ) -> Any:
        """The user's memories, newest first, a page at a time (every version with
        `history`; the state at a past time with `as_of`)."""
        if as_of is not None and as_of.tzinfo is None:
            raise ApiProblem(422, "invalid-request", "as_of must carry a time zone")
        user = await caller.user(user_id)
        found = await caller.memory.memories(
            user, memory_type=memory_type, history=history, as_of=as_of
        )
        start = int(cursor or 0)
        end = start + limit
        page = {
            "user_id": user,
            "items": found[start:end],
            "next_cursor": str(end) if end < len(found) else None,
        }
        return caller.reply(page)

    @router.get("/memories/{memory_id}/history", response_model=m.MemoryHistory, tags=["read"])
    async def memory_history(
        memory_id: Annotated[str, _path_id()], caller: Authenticated, user_id: UserQuery = None
    ) -> Any:
        """Every version of one memory, oldest first, with the events that made it."""
        user = await caller.user(user_id)
        versions = await caller.memory.history(user, memory_id)
        return caller.reply({"user_id": user, "memory_id": memory_id, "versions": versions})

    @router.get("/profile", response_model=m.Profile, tags=["read"])
    async def profile(caller: Authenticated, user_id: UserQuery = None) -> Any:
        """The user's L0 profile (null before anything was learned)."""
        user = await caller.user(user_id)
        return caller.reply({"user_id": user, "profile": await caller.memory.profile(user)})

    @router.get(
        "/events",
        tags=["read"],
        response_class=StreamingResponse,
        responses={
            200: {
                "description": "One memory event per line (NDJSON), oldest first",
                "content": {NDJSON: {"schema": {"type": "string"}}},
            }
        },
    )
    async def events(
        caller: Authenticated,
        user_id: UserQuery = None,
        since: Annotated[
            str | None,
            Query(
                max_length=64,
                description="A memories-topic offset, or an ISO time with a time zone",
            ),
        ] = None,
        follow: bool = False,
    ) -> StreamingResponse:
        """The user's memory events from the log; with `follow`, live ones too (the stream
        stays open)."""
        start = _since(since)
        user = await caller.user(user_id)
        return StreamingResponse(
            _ndjson(caller, user, start, follow), media_type=NDJSON, headers=caller.headers
        )


def _operations_routes(router: APIRouter) -> None:
    """Operations: the key's principal and the pipeline's health."""

    @router.get("/status", response_model=m.Status, tags=["operations"])
    async def status(caller: Authenticated) -> Any:
        """The key's principal and the pipeline's health (broker, database, lag, dead letters:
        counts only, no user data)."""
        from memstream.runtime.status import status as pipeline_status

        report = await asyncio.to_thread(pipeline_status, caller.memory.settings, timeout=3.0)
        key = caller.key
        return caller.reply(
            {
                "key_id": key.key_id,
                "principal": key.grant.principal.model_dump(),
                "user_prefix": key.grant.user_prefix,
                "ignored_user_ids": key.ignored_user_ids,
                "pipeline": report,
            }
        )


def _forget_routes(router: APIRouter) -> None:
    """Forgetting: each DELETE writes one request to the log and answers 202 with its id; the
    stages carry it out in order, and its receipt tells when they have
    (docs/architecture.md, "Forgetting")."""
    accepted: dict[int | str, dict[str, Any]] = {
        202: {"description": "The request is in the log; its receipt follows"}
    }
    unknown_memory: dict[int | str, dict[str, Any]] = {
        404: {"model": Problem, "description": "The user has no such memory"}
    }

    @router.delete(
        "/users/{user_id}/memories/{memory_id}",
        status_code=202,
        response_model=m.ForgetAccepted,
        responses={**accepted, **unknown_memory},
        tags=["forget"],
    )
    async def forget_memory(
        user_id: UserPath,
        memory_id: IdPath,
        caller: Authenticated,
        reason: Reason = "",
    ) -> Any:
        """Forget one memory, every version of it (a service account: one of its own)."""
        user = await caller.user(user_id)
        request_id = await caller.memory.forget(user, memory_id, reason=reason)
        return caller.reply({"user_id": user, "request_id": request_id}, 202)

    @router.delete(
        "/users/{user_id}/sessions/{session_id}",
        status_code=202,
        response_model=m.ForgetAccepted,
        responses=accepted,
        tags=["forget"],
    )
    async def forget_session(
        user_id: UserPath,
        session_id: UserPath,
        caller: Authenticated,
        reason: Reason = "",
    ) -> Any:
        """Forget a session: its turns, snapshots and the memories it contributed to (a
        service account: one of its own sessions)."""
        user = await caller.user(user_id)
        request_id = await caller.memory.forget_session(user, session_id, reason=reason)
        return caller.reply({"user_id": user, "request_id": request_id}, 202)

    @router.delete(
        "/users/{user_id}",
        status_code=202,
        response_model=m.ForgetAccepted,
        responses=accepted,
        tags=["forget"],
    )
    async def forget_user(user_id: UserPath, caller: Authenticated, reason: Reason = "") -> Any:
        """Forget everything of a user. A service account key may forget only itself: it must
        name its own id (any other is refused, not replaced)."""
        user = await caller.whole_user(user_id)
        request_id = await caller.memory.forget_user(user, reason=reason)
        return caller.reply({"user_id": user, "request_id": request_id}, 202)

    @router.get("/users/{user_id}/erasures", response_model=m.Erasures, tags=["forget"])
    async def erasures(user_id: UserPath, caller: Authenticated) -> Any:
        """The user's erasure receipts, newest first, each with `complete`."""
        user = await caller.user(user_id)
        return caller.reply({"user_id": user, "erasures": await caller.memory.erasures(user)})

    @router.get(
        "/erasures/{request_id}",
        response_model=m.ErasureReceipt,
        responses={404: {"model": Problem, "description": "No receipt this key may read"}},
        tags=["forget"],
    )
    async def erasure(request_id: IdPath, caller: Authenticated) -> Any:
        """One request's receipt (404 until its first step is projected, and for a receipt of
        a user the key may not read)."""
        receipt = await caller.memory.erasure(request_id)
        if receipt is None or not await caller.may_read(receipt["user_id"]):
            raise ApiProblem(404, "not-found", f"no erasure receipt {request_id!r}")
        return caller.reply(receipt)


def _path_id() -> Any:
    return Path(min_length=1, max_length=300, pattern=r"^[^\s|\x00-\x1f]+$")


def _since(since: str | None) -> int | datetime | None:
    if since is None:
        return None
    if since.isdigit():
        return int(since)
    try:
        when = datetime.fromisoformat(since)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise ApiProblem(422, "invalid-request", "since: an offset or an ISO time with a zone")
    return when


async def _ndjson(
    caller: Caller, user: str, since: int | datetime | None, follow: bool
) -> AsyncIterator[bytes]:
    async for event in caller.memory.events(user, since=since, follow=follow):
        yield orjson.dumps(event.model_dump(mode="json")) + b"\n"


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The generated document, with errors as `application/problem+json`."""
    if app.openapi_schema is None:
        document = get_openapi(
            title=app.title,
            version=app.version,
            summary=app.summary,
            routes=app.routes,
        )
        for path in document.get("paths", {}).values():
            for operation in path.values():
                for code, response in operation.get("responses", {}).items():
                    content = response.get("content", {})
                    if code.startswith(("4", "5")):
                        schema = {"$ref": "#/components/schemas/Problem"}
                        response["content"] = {PROBLEM_JSON: {"schema": schema}}
                    elif "application/json" in content and NDJSON in content:
                        del content["application/json"]
        document["components"]["schemas"].pop("HTTPValidationError", None)
        document["components"]["schemas"].pop("ValidationError", None)
        app.openapi_schema = document
    return app.openapi_schema
