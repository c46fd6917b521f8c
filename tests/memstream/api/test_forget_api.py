"""Forgetting over HTTP against the running pipeline: each DELETE writes the right request to the
right topic, partition and key; keys are authorised as for every per-user call; receipts are read
back with their completeness; the event feed skips forgotten memories.

What the stages then erase is tested with the stages; this layer's work ends at the log."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from events import decode
from events.codec import EventDecodeError
from events.forgetting import MemoryForgotten, SessionForgotten, UserForgotten
from events.turns import session_key
from memstream.sdk.event_feed import user_partition
from memstream.sdk.http_client import ApiError, HttpMemoryClient
from tests.support.api import SERVICE_ACCOUNT, ServedApi
from tests.support.pipeline import eventually, read_topic

pytestmark = pytest.mark.integration


def client(api: ServedApi, key: str) -> HttpMemoryClient:
    return HttpMemoryClient(api.url, api.keys[key])


def requests_in_log(api: ServedApi, topic: str, request_id: str) -> list[tuple[int, str, Any]]:
    """`(partition, key, event)` of every record of `topic` whose event id is `request_id`."""
    kafka = api.pipeline.settings.kafka
    records = asyncio.run(read_topic(kafka.bootstrap_servers or "", topic, kafka.partitions))
    found = []
    for record in records:
        try:
            event = decode(record.value)
        except EventDecodeError:
            continue
        if event.event_id == request_id:
            found.append((record.partition, record.key.decode(), event))
    return found


def saved_memory(memory: HttpMemoryClient, user: str, text: str) -> str:
    memory.save("semantic", text, user_id=user)
    found = eventually(
        lambda: list(memory.memories(user_id=user)),
        lambda every: any(m["text"] == text for m in every),
        what=f"{text!r} projected",
    )
    return str(next(m["memory_id"] for m in found if m["text"] == text))


def test_forgetting_a_memory_writes_memory_forgotten_of_its_type_keyed_by_its_user(
    api: ServedApi,
) -> None:
    topics = api.pipeline.settings.kafka.topics
    with client(api, "acme") as memory:
        memory_id = saved_memory(memory, "acme-fm", "The user keeps bees.")
        request_id = memory.forget(memory_id, user_id="acme-fm", reason="asked in chat")
    ((partition, key, request),) = requests_in_log(api, topics.snapshots, request_id)
    assert isinstance(request, MemoryForgotten)
    assert (request.user_id, request.memory_id, request.memory_type) == (
        "acme-fm",
        memory_id,
        "semantic",
    )
    assert request.requested_by == "application:acme" and request.reason == "asked in chat"
    assert key == "acme-fm"
    assert partition == user_partition("acme-fm", api.pipeline.settings.kafka.partitions)
    assert requests_in_log(api, topics.turns, request_id) == []


def test_forgetting_a_memory_the_user_does_not_have_is_a_404_problem(api: ServedApi) -> None:
    with client(api, "acme") as memory:
        someone_elses = saved_memory(memory, "acme-owner", "The user owns a kayak.")
        for user, memory_id in (("acme-owner", "no-such-memory"), ("acme-other", someone_elses)):
            with pytest.raises(ApiError) as missing:
                memory.forget(memory_id, user_id=user)
            assert missing.value.status == 404
            assert missing.value.problem["type"].endswith("/memory-not-found")
            assert memory_id in missing.value.problem["detail"]


def test_forgetting_a_session_writes_session_forgotten_on_the_sessions_turns_partition(
    api: ServedApi,
) -> None:
    kafka = api.pipeline.settings.kafka
    with client(api, "acme") as memory:
        memory.record("s1", [{"role": "user", "content": "hello"}], user_id="acme-fs")
        request_id = memory.forget_session("s1", user_id="acme-fs")
    ((partition, key, request),) = requests_in_log(api, kafka.topics.turns, request_id)
    assert isinstance(request, SessionForgotten)
    assert (request.user_id, request.session_id) == ("acme-fs", "s1")
    assert request.requested_by == "application:acme" and request.reason == ""
    assert key == session_key("acme-fs", "s1")
    assert partition == user_partition(key, kafka.partitions)  # where the session's turns are


def test_forgetting_a_user_writes_one_copy_per_turns_partition_and_one_on_snapshots(
    api: ServedApi,
) -> None:
    kafka = api.pipeline.settings.kafka
    response = httpx.delete(
        f"{api.url}/v1/users/acme-fu",
        params={"reason": "account closed"},
        headers={"Authorization": f"Bearer {api.keys['acme']}"},
    )
    assert response.status_code == 202, response.text
    assert response.json()["user_id"] == "acme-fu"
    request_id = response.json()["request_id"]

    on_turns = requests_in_log(api, kafka.topics.turns, request_id)
    assert sorted(partition for partition, _, _ in on_turns) == list(range(kafka.partitions))
    for partition, key, copy in on_turns:
        assert isinstance(copy, UserForgotten) and copy.turns_partition == partition
        assert key == "acme-fu" and copy.reason == "account closed"
        assert copy.requested_by == "application:acme"
    ((_, key, on_snapshots),) = requests_in_log(api, kafka.topics.snapshots, request_id)
    assert isinstance(on_snapshots, UserForgotten) and on_snapshots.turns_partition is None
    assert key == "acme-fu"
    assert len({copy.occurred_at for _, _, copy in on_turns} | {on_snapshots.occurred_at}) == 1


@pytest.mark.parametrize(
    ("key", "user"),
    [
        ("globex", "acme-iso"),  # another application's prefix
        ("acme", "globex-iso"),
        ("app", SERVICE_ACCOUNT),  # an unrestricted application, a service account's memory
        ("acme", SERVICE_ACCOUNT),
    ],
)
def test_no_key_can_forget_or_read_the_erasures_of_another_principals_users(
    api: ServedApi, key: str, user: str
) -> None:
    with client(api, key) as memory:
        calls: dict[str, Callable[[], object]] = {
            "memory": lambda: memory.forget("m1", user_id=user),
            "session": lambda: memory.forget_session("s1", user_id=user),
            "user": lambda: memory.forget_user(user),
            "erasures": lambda: memory.erasures(user_id=user),
        }
        for name, call in calls.items():
            with pytest.raises(ApiError) as refused:
                call()
            assert refused.value.status == 403, name
            assert refused.value.problem["type"].endswith("/forbidden-user"), name


def test_a_service_account_forgets_only_in_its_own_memory(api: ServedApi) -> None:
    kafka = api.pipeline.settings.kafka
    auth = {"Authorization": f"Bearer {api.keys['svc']}"}
    another_user = httpx.delete(f"{api.url}/v1/users/acme-victim", headers=auth)
    assert another_user.status_code == 403
    assert "only its own memory" in another_user.json()["detail"]

    session = httpx.delete(f"{api.url}/v1/users/acme-victim/sessions/s1", headers=auth)
    assert session.status_code == 202, session.text
    assert session.json()["user_id"] == SERVICE_ACCOUNT  # the deployed-agent rule, as elsewhere
    assert session.headers["Memstream-Ignored-User-Id"] == "acme-victim"
    ((_, key, _),) = requests_in_log(api, kafka.topics.turns, session.json()["request_id"])
    assert key == session_key(SERVICE_ACCOUNT, "s1")

    with client(api, "svc") as memory:
        request_id = memory.forget_user(SERVICE_ACCOUNT)
    copies = requests_in_log(api, kafka.topics.turns, request_id)
    assert len(copies) == kafka.partitions
    assert {copy.requested_by for _, _, copy in copies} == {f"service_account:{SERVICE_ACCOUNT}"}


def receipt(user: str, kind: str, steps: dict[str, Any], minutes_ago: int) -> dict[str, Any]:
    return {
        "_id": f"r-{uuid.uuid4().hex}",
        "kind": kind,
        "user_id": user,
        "requested_by": "application:acme",
        "reason": "",
        "requested_at": datetime.now(UTC) - timedelta(minutes=minutes_ago),
        "steps": steps,
    }


def test_receipts_are_read_back_newest_first_with_their_completeness(api: ServedApi) -> None:
    at = datetime.now(UTC)
    done = receipt(
        "acme-rc",
        "memory",
        {"memories-x": {"topic": "memories", "at": at, "memories": 1, "memory_ids": ["m"]}},
        minutes_ago=5,
    )
    pending = receipt(
        "acme-rc", "session", {"turns-0": {"topic": "turns", "at": at, "turns": 3}}, minutes_ago=1
    )
    api.pipeline.db["erasures"].insert_many([dict(done), dict(pending)])
    with client(api, "acme") as memory:
        listed = memory.erasures(user_id="acme-rc")
        assert [r["request_id"] for r in listed] == [pending["_id"], done["_id"]]
        assert [r["complete"] for r in listed] == [False, True]
        assert listed[0]["expected_steps"] == {"turns": 1, "snapshots": 1, "memories": 4}
        assert listed[0]["seen_steps"] == {"turns": 1, "snapshots": 0, "memories": 0}
        assert memory.wait_for_erasure(done["_id"], timeout=5)["complete"] is True
        with pytest.raises(TimeoutError):
            memory.wait_for_erasure(pending["_id"], timeout=1, poll=0.2)
        assert memory.erasure("no-such-request") is None
    for key in ("globex", "svc"):  # another principal's receipt is not found, not forbidden
        with client(api, key) as other:
            assert other.erasure(done["_id"]) is None


def test_the_event_feed_skips_the_events_of_memories_a_receipt_lists_as_erased(
    api: ServedApi,
) -> None:
    with client(api, "acme") as memory:
        kept = saved_memory(memory, "acme-ev", "The user sails.")
        erased = saved_memory(memory, "acme-ev", "The user paints.")
        before = {e["memory_id"] for e in memory.events(user_id="acme-ev")}
        assert before == {kept, erased}
        step = {"topic": "memories", "memories": 1, "memory_ids": [erased], "versions": 1}
        api.pipeline.db["erasures"].insert_one(
            receipt("acme-ev", "memory", {"memories-e": step}, minutes_ago=0)
        )
        assert {e["memory_id"] for e in memory.events(user_id="acme-ev")} == {kept}
