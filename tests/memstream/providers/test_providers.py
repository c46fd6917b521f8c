"""The model clients: what an endpoint's errors become (outages to wait out, with Retry-After)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import pytest

from handlers.ports import LLMUnavailable
from memstream.providers.clients import OpenAIChatModel, retry_after


def rate_limited(headers: dict[str, str]) -> openai.RateLimitError:
    request = httpx.Request("POST", "http://llm.test/v1/chat/completions")
    response = httpx.Response(429, headers=headers, request=request)
    return openai.RateLimitError("slow down", response=response, body=None)


def test_retry_after_in_seconds_and_in_milliseconds() -> None:
    assert retry_after(rate_limited({"retry-after": "7"})) == 7.0
    assert retry_after(rate_limited({"retry-after-ms": "250", "retry-after": "7"})) == 0.25
    assert retry_after(rate_limited({})) is None
    assert retry_after(rate_limited({"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"})) is None
    assert retry_after(ValueError("no response")) is None


def test_a_429_is_an_outage_that_carries_its_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    model = OpenAIChatModel(base_url="http://llm.test/v1", api_key="k", model="m")

    async def refuse(**_: Any) -> Any:
        raise rate_limited({"retry-after": "2"})

    monkeypatch.setattr(model._client.chat.completions, "create", refuse)
    with pytest.raises(LLMUnavailable) as raised:
        asyncio.run(model.complete_json([{"role": "user", "content": "hi"}]))
    assert raised.value.retry_after == 2.0
