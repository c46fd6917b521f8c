"""The MCP server: tools `remember`, `recall`, `forget`, `rollback_memory` and
`consolidate_memories`, scoped by an API key.

Over streamable HTTP (mounted at ``/mcp`` of the API) the key is the request's
``Authorization: Bearer`` header; over stdio (`memstream mcp`) it is the key the server was
started with (``MEMSTREAM_API_KEY``). Either way every tool call authenticates the key again (a
revoked key is refused at once) and goes through the same `Caller` as the HTTP endpoints, so the
key's grant decides the memory user (docs/architecture.md, "HTTP API and keys").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import pydantic
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from events.consolidations import DEFAULT_MAX_CALLS
from events.memories import MemoryType
from handlers.identity import Refused
from handlers.messages import InvalidMessageError
from memstream.api.auth import Caller, authenticated
from memstream.api.keys import InvalidKey, KeyStore, RateLimited
from memstream.config import Settings
from memstream.sdk.client import MemoryClient, MemoryNotFound

CallerOf = Callable[[Context], Awaitable[Caller]]


def build_mcp(caller_of: CallerOf, **options: Any) -> MCPServer:
    """An MCP server whose tools act for the caller `caller_of` finds for each call."""
    server: MCPServer = MCPServer(
        "memstream",
        instructions="Long-term memory: `remember` a conversation's messages, `recall` what "
        "was learned about the user, `forget` a memory or a session the user wants gone, "
        "`rollback_memory` to restore a memory's earlier version; `consolidate_memories` to "
        "merge duplicates and supersede contradictions.",
        **options,
    )

    @server.tool()
    async def remember(
        session_id: str,
        messages: list[dict[str, Any]],
        ctx: Context,
        user_id: str | None = None,
        end_session: bool = False,
    ) -> dict[str, Any]:
        """Record messages ({"role": "user"|"assistant"|..., "content": ...}) of a session.
        Knowledge is extracted later; `end_session` promotes the session now. A service-account
        key ignores `user_id` (its memory is its own)."""
        async with _refusals_as_tool_errors():
            caller = await caller_of(ctx)
            user = await caller.user(user_id)
            turns = await caller.memory.record(user, session_id, messages)
            if end_session:
                await caller.memory.flush(user, session_id)
            return {"user_id": user, "turn_ids": [t.event_id for t in turns]}

    @server.tool()
    async def recall(
        query: str,
        ctx: Context,
        user_id: str | None = None,
        session_id: str | None = None,
        mode: Literal["context", "search"] = "context",
        limit: int = 10,
    ) -> dict[str, Any]:
        """What memstream knows that answers `query`: a prompt-ready context block (profile,
        relevant memories, the session so far) or, with mode="search", the ranked memories."""
        async with _refusals_as_tool_errors():
            caller = await caller_of(ctx)
            user = await caller.user(user_id)
        if mode == "search":
            found = await caller.memory.search(user, query, limit=max(1, min(limit, 100)))
            memories = [
                {
                    "memory_id": m["memory_id"],
                    "memory_type": m["memory_type"],
                    "text": m["text"],
                    "score": float(m["score"]),
                }
                for m in found
            ]
            return {"user_id": user, "memories": memories}
        block = await caller.memory.build_context(user, query, session_id=session_id)
        return {"user_id": user, "context": block}

    @server.tool()
    async def forget(
        ctx: Context,
        user_id: str | None = None,
        memory_id: str | None = None,
        session_id: str | None = None,
        reason: str = "",
    ) -> dict[str, Any]:
        """Forget one memory (`memory_id`, from `recall` with mode="search") or a whole session
        (`session_id`: its messages and what was learned from it); give exactly one. The
        stages erase it shortly after; returns the request id. A service-account key forgets
        from its own memory."""
        async with _refusals_as_tool_errors():
            if (memory_id is None) == (session_id is None):
                raise ToolError("give exactly one of memory_id and session_id")
            caller = await caller_of(ctx)
            user = await caller.user(user_id)
            if memory_id is not None:
                request_id = await caller.memory.forget(user, memory_id, reason=reason)
            else:
                request_id = await caller.memory.forget_session(
                    user, session_id or "", reason=reason
                )
            return {"user_id": user, "request_id": request_id}

    @server.tool()
    async def rollback_memory(
        memory_id: str,
        to_version: int,
        ctx: Context,
        user_id: str | None = None,
        reason: str = "",
    ) -> dict[str, Any]:
        """Restore a memory (`memory_id`, from `recall` with mode="search") to its earlier
        version `to_version`: a new version with that version's text. Who asked is the key's
        principal; `reason` says why. Returns the rollback's id; the memory's stage may refuse
        (an unknown version, the current one, an expired memory)."""
        async with _refusals_as_tool_errors():
            caller = await caller_of(ctx)
            user = await caller.user(user_id)
            rollback_id = await caller.memory.rollback(
                user,
                memory_id,
                to_version,
                requested_by=caller.memory.requested_by,
                reason=reason,
            )
            return {"user_id": user, "rollback_id": rollback_id}

    @server.tool()
    async def consolidate_memories(
        ctx: Context,
        user_id: str | None = None,
        memory_types: list[MemoryType] | None = None,
        max_calls: int = DEFAULT_MAX_CALLS,
        reason: str = "",
    ) -> dict[str, Any]:
        """Tidy the user's memories: near-duplicates of one subject are merged, contradicting
        ones superseded by the one true now (one LLM call per cluster, at most `max_calls` per
        memory type). Who asked is the key's principal; `reason` says why. Returns the
        consolidation's id; its result lists what was merged or superseded and the cost."""
        async with _refusals_as_tool_errors():
            caller = await caller_of(ctx)
            user = await caller.user(user_id)
            consolidation_id = await caller.memory.consolidate(
                user,
                memory_types=memory_types,
                max_calls=max_calls,
                requested_by=caller.memory.requested_by,
                reason=reason,
            )
            return {"user_id": user, "consolidation_id": consolidation_id}

    return server


@asynccontextmanager
async def _refusals_as_tool_errors() -> AsyncIterator[None]:
    """A refused key or user, or a bad message, is told to the client (other errors are not:
    the MCP server reports them without their text)."""
    try:
        yield
    except (
        InvalidKey,
        RateLimited,
        Refused,
        InvalidMessageError,
        MemoryNotFound,
        pydantic.ValidationError,
    ) as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from exc


def http_caller(state: Any) -> CallerOf:
    """Callers from the HTTP request's bearer key (`state`: the API's `app.state`)."""

    async def caller_of(ctx: Context) -> Caller:
        header = (ctx.headers or {}).get("authorization", "")
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not key:
            raise InvalidKey("an API key is required: Authorization: Bearer <key>")
        return await authenticated(state.keys, state.memory, key.strip())

    return caller_of


async def run_stdio(settings: Settings, key: str) -> None:
    """`memstream mcp`: the MCP server over stdio, acting with `key`."""
    if not settings.mongodb.uri:
        raise ValueError("MONGODB_URI is not set (is `memstream up` running?)")
    memory = MemoryClient(settings)
    keys = KeyStore(settings.mongodb.uri, settings.mongodb.database)

    async def caller_of(ctx: Context) -> Caller:
        return await authenticated(keys, memory, key)

    @asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[None]:
        await keys.authenticate(key)  # refuse to start with a bad key
        await memory.start()
        try:
            yield None
        finally:
            await memory.close()
            await keys.close()

    await build_mcp(caller_of, lifespan=lifespan).run_stdio_async()
