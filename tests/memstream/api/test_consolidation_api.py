"""Consolidation over HTTP and MCP against the running pipeline: the POST writes the request
with the key's principal as who asked, the stage merges the user's two alike memories, the GET
reads the run and its cost, history shows the retired memory; the MCP tool writes the same
request; no key consolidates another principal's users."""

from __future__ import annotations

import asyncio

import pytest

from events.consolidations import MemoryConsolidationRequested
from memstream.sdk.http_client import ApiError, HttpMemoryClient
from tests.memstream.api.test_forget_api import client, requests_in_log, saved_memory
from tests.memstream.api.test_mcp import call, over_http
from tests.support.api import ServedApi
from tests.support.pipeline import eventually

pytestmark = pytest.mark.integration
BEES = "The user keeps bees in a small wooden hive behind the old family house."
MORE_BEES = "The user keeps bees in a little wooden hive behind the old family house."
MERGED = "The user keeps bees in a small wooden hive behind the old family house (two hives)."


def alike_memories(api: ServedApi, memory: HttpMemoryClient, user: str) -> str:
    """Save two alike memories (reconciliation is told to ADD); the first one's id."""
    api.pipeline.llm.on(
        f"NEW: {MORE_BEES}",
        {"contradicts": None, "action": "ADD", "existing": None, "reason": "test"},
        scope="last_user",
    )
    first = saved_memory(memory, user, BEES)
    memory.save("semantic", MORE_BEES, user_id=user)
    eventually(
        lambda: list(memory.memories(user_id=user)),
        lambda found: len(found) == 2,
        what="two memories",
    )
    return first


def test_a_consolidation_over_http_merges_and_reports_its_cost(api: ServedApi) -> None:
    user = "acme-cons"
    api.pipeline.llm.on(
        "MEMORIES:",
        {"action": "MERGE", "keep": 1, "text": MERGED, "reason": "the same hive"},
    )
    with client(api, "acme") as memory:
        alike_memories(api, memory, user)
        consolidation_id = memory.consolidate(
            user_id=user, memory_types=["semantic"], max_calls=3, reason="tidy"
        )
        (run,) = memory.wait_for_consolidation(consolidation_id, 90, user_id=user)
        assert (run["requested_by"], run["reason"], run["max_calls"]) == (
            "application:acme",
            "tidy",
            3,
        )
        assert (run["clusters_found"], run["clusters_asked"], run["usage"]["calls"]) == (1, 1, 1)
        assert [c["action"] for c in run["clusters"]] == ["merge"]
        (kept,) = eventually(
            lambda: list(memory.memories(user_id=user)),
            lambda found: len(found) == 1,
            what="one memory left",
        )
        assert (kept["text"], kept["version"]) == (MERGED, 2)
        (gone,) = run["retired"]
        history = memory.history(gone["memory_id"], user_id=user)
        assert [v["status"] for v in history] == ["retired"]
    topics = api.pipeline.settings.kafka.topics
    ((_, key, request),) = requests_in_log(api, topics.snapshots, consolidation_id)
    assert isinstance(request, MemoryConsolidationRequested)
    assert (key, request.memory_types, request.max_calls) == (user, ("semantic",), 3)
    assert request.principal is not None and request.principal.id == "acme"


def test_no_key_consolidates_another_principals_users(api: ServedApi) -> None:
    with client(api, "acme") as memory:
        saved_memory(memory, "acme-cons-owner", "The user owns a red canoe.")
    with client(api, "globex") as other, pytest.raises(ApiError) as refused:
        other.consolidate(user_id="acme-cons-owner")
    assert refused.value.status in (403, 404)


def test_the_mcp_tool_writes_a_consolidation_request_with_the_keys_principal(
    api: ServedApi,
) -> None:
    user = "acme-cons-mcp"
    with client(api, "acme") as memory:
        saved_memory(memory, user, "The user plays the cello.")

    async def consolidate() -> str:
        async with over_http(api, api.keys["acme"]) as session:
            answer = await call(
                session,
                "consolidate_memories",
                {"user_id": user, "memory_types": ["semantic"], "reason": "test"},
            )
        return str(answer["consolidation_id"])

    consolidation_id = asyncio.run(consolidate())
    with client(api, "acme") as memory:
        (run,) = memory.wait_for_consolidation(consolidation_id, 90, user_id=user)
    assert (run["requested_by"], run["reason"]) == ("application:acme", "test")
    assert run["clusters_found"] == 0 and run["unchanged"] is not None
