"""Rollback over HTTP and MCP against the running pipeline: the POST writes the request with the
key's principal as who asked, the stage restores the version, the GET reads the result, history
shows it; an unknown memory is a 404; the MCP tool writes the same request."""

from __future__ import annotations

import asyncio

import pytest

from events.rollbacks import MemoryRollbackRequested
from memstream.sdk.http_client import ApiError, HttpMemoryClient
from memstream.sdk.results import Rollback
from tests.memstream.api.test_forget_api import client, requests_in_log, saved_memory
from tests.memstream.api.test_mcp import call, over_http
from tests.support.api import ServedApi
from tests.support.pipeline import eventually

pytestmark = pytest.mark.integration
BEES = "The user keeps bees in a small wooden hive behind the old family house."
WASPS = "The user keeps wasps in a small wooden hive behind the old family house."


def decided(memory: HttpMemoryClient, rollback_id: str, user: str) -> Rollback:
    found = eventually(
        lambda: memory.rollback_result(rollback_id, user_id=user),
        lambda result: result is not None,
        what=f"rollback {rollback_id} decided",
    )
    assert found is not None
    return found


def test_a_rollback_over_http_restores_the_version_and_history_shows_who_and_why(
    api: ServedApi,
) -> None:
    user = "acme-rb"
    api.pipeline.llm.on(
        f"NEW: {WASPS}",
        {"contradicts": 1, "action": "UPDATE", "existing": 1, "reason": "misheard"},
        scope="last_user",
    )
    with client(api, "acme") as memory:
        memory_id = saved_memory(memory, user, BEES)
        memory.save("semantic", WASPS, user_id=user)
        eventually(
            lambda: list(memory.memories(user_id=user)),
            lambda found: [(m["version"], m["text"]) for m in found] == [(2, WASPS)],
            what="version 2",
        )
        rollback_id = memory.rollback(memory_id, 1, user_id=user, reason="it was bees")
        result = decided(memory, rollback_id, user)
        assert (result["refused"], result["versions"]) == (None, [3])
        assert result["requested_by"] == "application:acme"
        (restored,) = eventually(
            lambda: list(memory.memories(user_id=user)),
            lambda found: found[0]["version"] == 3,
            what="version 3",
        )
        assert restored["text"] == BEES
        last = memory.history(memory_id, user_id=user)[-1]
        assert last["rolled_back_by"] is not None
        assert last["rolled_back_by"]["reason"] == "it was bees"

        refused_id = memory.rollback(memory_id, 3, user_id=user)
        refused = memory.wait_for_rollback(refused_id, 90, user_id=user)
        assert refused["refused"] is not None and "at version 3 already" in refused["refused"]

        with pytest.raises(ApiError) as missing:
            memory.rollback("no-such-memory", 1, user_id=user)
        assert missing.value.status == 404
    topics = api.pipeline.settings.kafka.topics
    ((_, key, request),) = requests_in_log(api, topics.snapshots, rollback_id)
    assert isinstance(request, MemoryRollbackRequested)
    assert (key, request.memory_id, request.to_version) == (user, memory_id, 1)
    assert request.principal is not None and request.principal.id == "acme"


def test_no_key_rolls_back_another_principals_users_memories(api: ServedApi) -> None:
    with client(api, "acme") as memory:
        memory_id = saved_memory(memory, "acme-rb-owner", "The user owns a red canoe.")
    with client(api, "globex") as other, pytest.raises(ApiError) as refused:
        other.rollback(memory_id, 1, user_id="acme-rb-owner")
    assert refused.value.status in (403, 404)


def test_the_mcp_tool_writes_a_rollback_request_with_the_keys_principal(api: ServedApi) -> None:
    user = "acme-rb-mcp"
    with client(api, "acme") as memory:
        memory_id = saved_memory(memory, user, "The user plays the cello.")

    async def roll_back() -> str:
        async with over_http(api, api.keys["acme"]) as session:
            answer = await call(
                session,
                "rollback_memory",
                {"user_id": user, "memory_id": memory_id, "to_version": 1, "reason": "test"},
            )
        return str(answer["rollback_id"])

    rollback_id = asyncio.run(roll_back())
    with client(api, "acme") as memory:
        result = decided(memory, rollback_id, user)
    assert result["refused"] is not None and "at version 1 already" in result["refused"]
    assert (result["requested_by"], result["reason"]) == ("application:acme", "test")
