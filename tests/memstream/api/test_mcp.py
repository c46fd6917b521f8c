"""The MCP server with the `mcp` package's own client session: each tool, over streamable HTTP
and stdio, scoped by the API key."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from events.forgetting import MemoryForgotten, SessionForgotten
from events.turns import session_key
from memstream.sdk.http_client import HttpMemoryClient
from tests.memstream.api.test_forget_api import requests_in_log, saved_memory
from tests.support.api import SERVICE_ACCOUNT, ServedApi

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]


@asynccontextmanager
async def over_http(api: ServedApi, key: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{api.url}/mcp/", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def over_stdio(api: ServedApi, key: str) -> AsyncIterator[ClientSession]:
    environment = {
        **os.environ,
        **api.pipeline.environment,
        "MEMSTREAM_API_KEY": key,
        "PYTHONPATH": str(ROOT),
    }
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "memstream", "mcp"], env=environment, cwd=ROOT
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result
    content: dict[str, Any] = result.structured_content
    return content


@pytest.mark.parametrize("transport", [over_http, over_stdio], ids=["http", "stdio"])
async def test_remember_then_recall_through_an_mcp_client_session(
    api: ServedApi, transport: Any
) -> None:
    user = f"acme-mcp-{transport.__name__}"
    opened: AbstractAsyncContextManager[ClientSession] = transport(api, api.keys["acme"])
    async with opened as session:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert tools == {
            "remember",
            "recall",
            "forget",
            "rollback_memory",
            "consolidate_memories",
        }
        remembered = await call(
            session,
            "remember",
            {
                "user_id": user,
                "session_id": "s1",
                "messages": [{"role": "user", "content": "I work at Stripe."}],
                "end_session": True,
            },
        )
        assert remembered["user_id"] == user and len(remembered["turn_ids"]) == 1

        async def searched() -> list[dict[str, Any]]:
            found = await call(
                session, "recall", {"user_id": user, "query": "Stripe", "mode": "search"}
            )
            memories: list[dict[str, Any]] = found["memories"]
            return memories

        for _ in range(300):  # poll with a deadline: extraction runs after the flush
            if [m["text"] for m in await searched()] == ["The user works at Stripe."]:
                break
            await asyncio.sleep(0.2)
        assert [m["text"] for m in await searched()] == ["The user works at Stripe."]
        context = await call(session, "recall", {"user_id": user, "query": "where do I work?"})
        assert "The user works at Stripe." in context["context"]


async def test_mcp_tools_are_scoped_by_the_key(api: ServedApi) -> None:
    async with over_http(api, api.keys["globex"]) as session:
        refused = await session.call_tool("recall", {"user_id": "acme-tim", "query": "Stripe"})
        assert refused.is_error
    async with over_http(api, api.keys["svc"]) as session:
        remembered = await call(
            session,
            "remember",
            {
                "user_id": "acme-tim",
                "session_id": "m1",
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
        assert remembered["user_id"] == SERVICE_ACCOUNT


async def test_mcp_over_http_refuses_a_missing_or_revoked_key(api: ServedApi) -> None:
    key = await asyncio.to_thread(api.create_key, "mcp-short", "application", "mcpx")
    async with over_http(api, key) as session:
        await call(session, "recall", {"user_id": "u", "query": "q", "mode": "search"})
        await asyncio.to_thread(api.revoke, key)
        refused = await session.call_tool("recall", {"user_id": "u", "query": "q"})
        assert refused.is_error
        assert "revoked" in str(refused.content)
    async with over_http(api, "msk_nope_nope") as session:
        assert (await session.call_tool("recall", {"user_id": "u", "query": "q"})).is_error


async def test_forget_through_an_mcp_client_session_writes_the_request_scoped_by_the_key(
    api: ServedApi,
) -> None:
    kafka = api.pipeline.settings.kafka
    with HttpMemoryClient(api.url, api.keys["acme"]) as memory:
        memory_id = await asyncio.to_thread(saved_memory, memory, "acme-mcpf", "The user rows.")
    async with over_http(api, api.keys["acme"]) as session:
        forgot_memory = await call(
            session, "forget", {"user_id": "acme-mcpf", "memory_id": memory_id, "reason": "r"}
        )
        forgot_session = await call(session, "forget", {"user_id": "acme-mcpf", "session_id": "s1"})
        unknown = await session.call_tool("forget", {"user_id": "acme-mcpf", "memory_id": "nope"})
        assert unknown.is_error and "MemoryNotFound" in str(unknown.content)
        both = await session.call_tool(
            "forget", {"user_id": "acme-mcpf", "memory_id": memory_id, "session_id": "s1"}
        )
        assert both.is_error and "exactly one" in str(both.content)
    async with over_http(api, api.keys["globex"]) as session:
        refused = await session.call_tool("forget", {"user_id": "acme-mcpf", "session_id": "s1"})
        assert refused.is_error
    assert forgot_memory["user_id"] == "acme-mcpf"
    ((_, key, request),) = await asyncio.to_thread(
        requests_in_log, api, kafka.topics.snapshots, forgot_memory["request_id"]
    )
    assert isinstance(request, MemoryForgotten) and request.memory_id == memory_id
    assert key == "acme-mcpf" and request.requested_by == "application:acme"
    ((_, key, request),) = await asyncio.to_thread(
        requests_in_log, api, kafka.topics.turns, forgot_session["request_id"]
    )
    assert isinstance(request, SessionForgotten) and key == session_key("acme-mcpf", "s1")
