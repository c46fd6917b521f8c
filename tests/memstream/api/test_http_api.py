"""The HTTP API against the running pipeline: every endpoint, keys, isolation, identity."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from datetime import timedelta
from typing import Any

import httpx
import orjson
import pytest

from events import encode
from events.turns import Principal, TurnRecorded
from memstream.sdk.http_client import ApiError, HttpMemoryClient
from tests import factories as f
from tests.support.api import SERVICE_ACCOUNT, ServedApi
from tests.support.pipeline import eventually, produce_raw

pytestmark = pytest.mark.integration


def client(api: ServedApi, key: str) -> HttpMemoryClient:
    return HttpMemoryClient(api.url, api.keys.get(key, key))


def learned(memory: HttpMemoryClient, user_id: str | None, text: str) -> list[dict[str, Any]]:
    return eventually(
        lambda: memory.search(text, user_id=user_id, mode="keyword"),
        lambda found: any(m["text"] == text for m in found),
        what=f"{text!r} searchable",
    )


def test_every_endpoint_records_and_reads_through_the_running_pipeline(api: ServedApi) -> None:
    with client(api, "acme") as memory:
        recorded = memory.record(
            "s1", [{"role": "user", "content": "I work at Stripe."}], user_id="acme-tim"
        )
        assert recorded["user_id"] == "acme-tim" and len(recorded["turn_ids"]) == 1
        assert memory.flush("s1", user_id="acme-tim") == {"user_id": "acme-tim", "session_id": "s1"}
        found = learned(memory, "acme-tim", "The user works at Stripe.")
        assert all(m["user_id"] == "acme-tim" for m in found)

        save_id = memory.save("semantic", "The user has a dog.", user_id="acme-tim")
        assert save_id
        learned(memory, "acme-tim", "The user has a dog.")

        context = memory.build_context("where does the user work?", user_id="acme-tim")
        assert "The user works at Stripe." in context
        assert "User: I work at Stripe." in context  # s1's message, recalled from the past
        context = memory.build_context("work?", user_id="acme-tim", past_messages=0)
        assert "## From earlier conversations" not in context
        context = memory.build_context("where does the user work?", user_id="acme-tim", per_type=0)
        assert "## Facts" not in context and "User: I work at Stripe." in context

        every = list(memory.memories(user_id="acme-tim", page_size=1))  # one page per memory
        assert sorted(m["text"] for m in every) == [
            "The user has a dog.",
            "The user works at Stripe.",
        ]
        stripe = next(m for m in every if "Stripe" in m["text"])
        versions = memory.history(stripe["memory_id"], user_id="acme-tim")
        assert [v["version"] for v in versions] == [1]
        assert versions[0]["created_by"]["event_type"] == "MemoryAdded"
        assert memory.profile(user_id="acme-tim") is None or isinstance(
            memory.profile(user_id="acme-tim"), dict
        )
        events = list(memory.events(user_id="acme-tim"))
        assert {e["event_type"] for e in events} == {"MemoryAdded"}
        assert len(events) == 2
        status = memory.status()
        assert status["principal"] == {"kind": "application", "id": "acme"}
        assert status["pipeline"]["database"]["reachable"] is True


def test_events_follow_streams_new_memory_events_as_they_are_made(api: ServedApi) -> None:
    lines: queue.Queue[dict[str, Any]] = queue.Queue()

    def follow() -> None:
        with client(api, "acme") as memory:
            for event in memory.events(user_id="acme-fol", follow=True):
                lines.put(event)
                return

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    with client(api, "acme") as memory:
        memory.save("semantic", "The user follows the news.", user_id="acme-fol")
    event = lines.get(timeout=60)
    assert event["event_type"] == "MemoryAdded"
    assert event["user_id"] == "acme-fol"
    reader.join(10)


@pytest.mark.parametrize(
    ("key", "user"),
    [
        ("globex", "acme-iso"),  # another application's prefix
        ("acme", "globex-iso"),
        ("app", SERVICE_ACCOUNT),  # an unrestricted application, a service account's memory
        ("acme", SERVICE_ACCOUNT),
    ],
)
def test_no_key_can_read_search_follow_or_write_another_principals_users(
    api: ServedApi, key: str, user: str
) -> None:
    with client(api, key) as memory:
        calls = {
            "search": lambda: memory.search("Stripe", user_id=user),
            "context": lambda: memory.build_context("Stripe", user_id=user),
            "memories": lambda: list(memory.memories(user_id=user)),
            "history": lambda: memory.history("m1", user_id=user),
            "profile": lambda: memory.profile(user_id=user),
            "events": lambda: list(memory.events(user_id=user, follow=True)),
            "record": lambda: memory.record(
                "s1", [{"role": "user", "content": "hi"}], user_id=user
            ),
            "flush": lambda: memory.flush("s1", user_id=user),
            "save": lambda: memory.save("semantic", "x", user_id=user),
        }
        for name, call in calls.items():
            with pytest.raises(ApiError) as refused:
                call()
            assert refused.value.status == 403, name
            assert refused.value.problem["type"].endswith("/forbidden-user"), name


def test_an_application_key_must_name_its_user(api: ServedApi) -> None:
    with client(api, "app") as memory, pytest.raises(ApiError) as refused:
        memory.search("Stripe")
    assert refused.value.status == 403
    assert "must name the user_id" in refused.value.problem["detail"]


def test_a_service_account_key_cannot_choose_its_user_id(api: ServedApi) -> None:
    with client(api, "acme") as memory:
        memory.record(
            "s9", [{"role": "user", "content": "acme-vic drinks tea"}], user_id="acme-vic"
        )
    before = next(k for k in api.stored_keys() if k.name == "svc").ignored_user_ids
    response = httpx.post(
        f"{api.url}/v1/turns",
        headers={"Authorization": f"Bearer {api.keys['svc']}"},
        json={
            "user_id": "acme-vic",
            "session_id": "s9",
            "messages": [{"role": "user", "content": "I like green tea."}],
        },
    )
    assert response.status_code == 202, response.text
    assert response.json()["user_id"] == SERVICE_ACCOUNT
    assert response.headers["Memstream-Ignored-User-Id"] == "acme-vic"
    after = next(k for k in api.stored_keys() if k.name == "svc").ignored_user_ids
    assert after == before + 1

    turns = eventually(
        lambda: list(api.pipeline.db["turns"].find({"session_id": "s9"})),
        lambda found: len(found) == 2,
        what="both turns projected",
    )
    by_user = {t["user_id"]: t for t in turns}
    assert set(by_user) == {"acme-vic", SERVICE_ACCOUNT}
    assert by_user[SERVICE_ACCOUNT]["principal"] == {
        "kind": "service_account",
        "id": SERVICE_ACCOUNT,
    }
    assert by_user["acme-vic"]["principal"] == {"kind": "application", "id": "acme"}
    with client(api, "svc") as memory:
        assert memory.flush("s9", user_id="acme-vic")["user_id"] == SERVICE_ACCOUNT
        learned(memory, "anyone", "The user drinks green tea.")
        assert all(m["user_id"] == SERVICE_ACCOUNT for m in memory.search("tea", user_id="x"))


def test_the_pipeline_dead_letters_a_service_account_turn_for_another_user(api: ServedApi) -> None:
    forged: TurnRecorded = f.turn(
        user_id="acme-forged",
        session_id="s1",
        principal=Principal(kind="service_account", id=SERVICE_ACCOUNT),
    )
    kafka = api.pipeline.settings.kafka
    asyncio.run(
        produce_raw(
            kafka.bootstrap_servers or "",
            kafka.topics.turns,
            [(forged.key.encode(), encode(forged), None)],
        )
    )
    letters = eventually(
        lambda: list(api.pipeline.db["dead_letters"].find({"record_key": forged.key})),
        lambda found: len(found) == 1,
        what="the forged turn dead-lettered",
    )
    assert "cannot record for user 'acme-forged'" in letters[0]["reason"]
    assert api.pipeline.db["turns"].count_documents({"user_id": "acme-forged"}) == 0


def test_a_revoked_key_is_refused_at_once(api: ServedApi) -> None:
    key = api.create_key("short-lived", "application", "tmp", user_prefix="tmp-")
    with HttpMemoryClient(api.url, key) as memory:
        assert memory.status()["principal"]["id"] == "tmp"
        api.revoke(key)
        with pytest.raises(ApiError) as refused:
            memory.search("anything", user_id="tmp-u")
    assert refused.value.status == 401
    assert refused.value.problem["detail"] == "revoked API key"


def test_a_key_over_its_rate_gets_429_with_retry_after_and_other_keys_do_not(
    api: ServedApi,
) -> None:
    key = api.create_key("limited", "application", "rate", user_prefix="rate-", rate_limit=3)
    headers = {"Authorization": f"Bearer {key}"}
    answers = [httpx.get(f"{api.url}/v1/status", headers=headers, timeout=10) for _ in range(7)]
    codes = [answer.status_code for answer in answers]
    # A minute boundary between the requests resets the count: in at most two windows, 3 + 3
    # are allowed, so the seventh is refused whatever the clock (5 requests all passed in CI,
    # split 3 + 2 by a boundary).
    assert codes.count(429) >= 1 and codes.count(200) <= 6
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert refused.json()["type"].endswith("rate-limited")
    assert refused.headers["content-type"].startswith("application/problem+json")
    with HttpMemoryClient(api.url, api.keys["app"]) as unlimited:
        for _ in range(5):
            unlimited.status()


def test_an_expired_key_is_refused(api: ServedApi) -> None:
    key = api.create_key(
        "expiring", "application", "expiry", user_prefix="exp-", expires_in=timedelta(seconds=2)
    )
    with HttpMemoryClient(api.url, key) as memory:
        assert memory.status()["principal"]["id"] == "expiry"
        time.sleep(2.5)
        with pytest.raises(ApiError) as refused:
            memory.status()
    assert refused.value.status == 401
    assert refused.value.problem["detail"] == "expired API key"


def test_errors_are_problem_details(api: ServedApi) -> None:
    missing = httpx.post(f"{api.url}/v1/search", json={"user_id": "u", "query": "q"})
    assert missing.status_code == 401
    assert missing.headers["content-type"] == "application/problem+json"
    assert missing.json()["type"].endswith("/unauthenticated")
    assert missing.json()["instance"] == "/v1/search"

    auth = {"Authorization": f"Bearer {api.keys['app']}"}
    bad_message = httpx.post(
        f"{api.url}/v1/turns",
        headers=auth,
        json={"user_id": "u", "session_id": "s", "messages": [{"role": "robot", "content": "x"}]},
    )
    assert bad_message.status_code == 422
    assert bad_message.json()["type"].endswith("/invalid-message")
    assert "message 0" in bad_message.json()["detail"]

    invalid = httpx.post(f"{api.url}/v1/search", headers=auth, json={"user_id": "u"})
    assert invalid.status_code == 422 and invalid.json()["errors"][0]["loc"] == ["body", "query"]

    huge = orjson.dumps({"user_id": "u", "query": "x" * (2 * 1024 * 1024)})
    too_large = httpx.post(
        f"{api.url}/v1/search",
        headers={**auth, "Content-Type": "application/json"},
        content=huge,
    )
    assert too_large.status_code == 413
    assert too_large.json()["type"].endswith("/request-too-large")

    def chunks() -> Any:
        for _ in range(40):
            yield b"x" * 65_536

    chunked = httpx.post(f"{api.url}/v1/search", headers=auth, content=chunks())
    assert chunked.status_code == 413


def test_the_openapi_document_describes_every_endpoint(api: ServedApi) -> None:
    document = httpx.get(f"{api.url}/openapi.json").json()
    assert set(document["paths"]) == {
        "/v1/turns",
        "/v1/flush",
        "/v1/saves",
        "/v1/search",
        "/v1/context",
        "/v1/memories",
        "/v1/memories/{memory_id}/history",
        "/v1/profile",
        "/v1/events",
        "/v1/status",
        "/v1/users/{user_id}",
        "/v1/users/{user_id}/memories/{memory_id}",
        "/v1/users/{user_id}/sessions/{session_id}",
        "/v1/users/{user_id}/erasures",
        "/v1/erasures/{request_id}",
        "/v1/users/{user_id}/memories/{memory_id}/rollback",
        "/v1/users/{user_id}/rollbacks/{rollback_id}",
        "/v1/users/{user_id}/consolidations",
        "/v1/users/{user_id}/consolidations/{consolidation_id}",
    }
    rollback = document["paths"]["/v1/users/{user_id}/memories/{memory_id}/rollback"]["post"]
    assert rollback["security"] == [{"ApiKey": []}]
    search = document["paths"]["/v1/search"]["post"]
    assert search["security"] == [{"ApiKey": []}]
    assert "application/problem+json" in search["responses"]["403"]["content"]
