"""The search filters are declared once (`memstream.sdk.search_filters`) and every surface that
takes them agrees with that declaration."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import httpx
import orjson

from handlers.search import Filters
from memstream.api.models import Search
from memstream.sdk.http_client import HttpMemoryClient
from memstream.sdk.search_filters import SearchFilters, as_filters

NOT_FILTERS = {"user_id", "query", "limit", "mode"}
"""The search body's fields that say what to search and how, not which memories."""


def test_every_filter_is_a_rule_of_the_read_model_and_a_field_of_the_http_body() -> None:
    declared = SearchFilters.__optional_keys__
    assert declared == {field.name for field in dataclasses.fields(Filters)}
    assert declared == set(Search.model_fields) - NOT_FILTERS
    assert not SearchFilters.__required_keys__


def test_the_http_body_hands_on_exactly_its_filters() -> None:
    since = datetime(2026, 1, 1, tzinfo=UTC)
    body = Search.model_validate(
        {"query": "tea", "types": ["semantic"], "subject": "Ann", "since": since.isoformat()}
    )
    assert body.filters() == {
        "types": ["semantic"],
        "agent_id": None,
        "subject": "Ann",
        "owner": None,
        "category": None,
        "since": since,
        "until": None,
    }
    assert as_filters(body.filters()) == Filters(types=["semantic"], subject="Ann", since=since)


def test_the_http_client_sends_the_filters_given_as_json_and_leaves_out_the_rest() -> None:
    sent: list[dict[str, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(orjson.loads(request.content))
        return httpx.Response(200, json={"user_id": "ann", "results": []})

    client = HttpMemoryClient("http://memstream.test", "key")
    client._http = httpx.Client(
        base_url="http://memstream.test/v1", transport=httpx.MockTransport(answer)
    )
    until = datetime(2026, 2, 1, tzinfo=UTC)
    assert client.search("tea", user_id="ann", types={"episodic"}, until=until, limit=3) == []
    assert sent == [
        {
            "user_id": "ann",
            "query": "tea",
            "limit": 3,
            "mode": "hybrid",
            "types": ["episodic"],
            "until": "2026-02-01T00:00:00+00:00",
        }
    ]
