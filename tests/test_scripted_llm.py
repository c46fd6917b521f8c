"""The scripted OpenAI-compatible server, exercised with the real openai client."""

from __future__ import annotations

import base64
import json
import math
import struct
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from tests.support.scripted_llm import HTTPFailure, ScriptedLLM, embed_text


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


def client(llm: ScriptedLLM, **kwargs: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=llm.base_url, api_key="test", **kwargs)  # type: ignore[arg-type]


def decode(embedding: list[float] | str) -> list[float]:
    # an explicit encoding_format="base64" hands the raw string back to the caller
    if isinstance(embedding, str):
        raw = base64.b64decode(embedding)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return embedding


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_default_answer_and_usage(llm: ScriptedLLM) -> None:
    resp = client(llm).chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "hello there"}],
        response_format={"type": "json_object"},
    )
    assert json.loads(resp.choices[0].message.content or "") == {"facts": []}
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None and resp.usage.total_tokens > 0
    assert resp.model == "m"
    assert llm.requests[0]["response_format"] == {"type": "json_object"}
    assert llm.chat_requests[0]["messages"][0]["content"] == "hello there"


def test_rules_first_match_wins_and_scopes(llm: ScriptedLLM) -> None:
    llm.on("tea", {"facts": [{"text": "the user likes tea"}]})
    llm.on("tea", "never reached")
    llm.on(lambda text: text.startswith("I moved"), "moved", scope="last_user")
    llm.on("SYSTEM-ONLY", "by system", times=1)
    c = client(llm)

    def ask(user: str, system: str = "extract facts") -> str:
        resp = c.chat.completions.create(
            model="m",
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        )
        return resp.choices[0].message.content or ""

    assert json.loads(ask("I like tea")) == {"facts": [{"text": "the user likes tea"}]}
    assert ask("I moved to Paris") == "moved"
    # last_user scope: the system prompt does not count
    assert ask("hello", system="I moved") == '{"facts": []}'
    assert ask("x", system="SYSTEM-ONLY") == "by system"
    assert ask("x", system="SYSTEM-ONLY") == '{"facts": []}'  # times=1 used up


def test_callable_response_sees_request(llm: ScriptedLLM) -> None:
    llm.on("echo", lambda req: {"n": len(req["messages"]), "model": req["model"]})
    resp = client(llm).chat.completions.create(
        model="x", messages=[{"role": "user", "content": "echo"}]
    )
    assert json.loads(resp.choices[0].message.content or "") == {"n": 1, "model": "x"}


def test_content_parts_are_matched(llm: ScriptedLLM) -> None:
    llm.on("parts", "ok")
    resp = client(llm).chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": [{"type": "text", "text": "in parts"}]}],
    )
    assert resp.choices[0].message.content == "ok"


def test_invalid_json_then_valid(llm: ScriptedLLM) -> None:
    llm.on("x", '{"facts": ["ok"]}')
    llm.fail_json(2)
    c = client(llm)
    answers = [
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        .choices[0]
        .message.content
        or ""
        for _ in range(3)
    ]
    for bad in answers[:2]:
        with pytest.raises(json.JSONDecodeError):
            json.loads(bad)
    assert json.loads(answers[2]) == {"facts": ["ok"]}
    assert len(llm.chat_requests) == 3


def test_http_errors(llm: ScriptedLLM) -> None:
    llm.fail_http(503, times=1)
    with pytest.raises(openai.InternalServerError) as info:
        client(llm, max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )
    assert info.value.status_code == 503
    llm.enqueue(HTTPFailure(429, "slow down", "rate_limit_error"))
    with pytest.raises(openai.RateLimitError):
        client(llm, max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )
    # with retries the client absorbs one failure
    llm.fail_http(500, times=1)
    resp = client(llm, max_retries=1).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}]
    )
    assert resp.choices[0].message.content == '{"facts": []}'
    llm.fail_http(500, times=1, endpoint="embeddings")
    with pytest.raises(openai.InternalServerError):
        client(llm, max_retries=0).embeddings.create(model="e", input="x")


def test_a_failing_llm_fails_chat_and_embeddings_until_it_is_cleared(llm: ScriptedLLM) -> None:
    llm.failing = HTTPFailure(500, "scripted outage")
    for _ in range(3):
        with pytest.raises(openai.InternalServerError):
            client(llm, max_retries=0).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}]
            )
        with pytest.raises(openai.InternalServerError):
            client(llm, max_retries=0).embeddings.create(model="e", input="x")
    llm.failing = None
    resp = client(llm, max_retries=0).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}]
    )
    assert resp.choices[0].message.content == '{"facts": []}'


def test_streaming(llm: ScriptedLLM) -> None:
    llm.on("x", "streamed answer")
    stream = client(llm).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "streamed answer"


@pytest.mark.parametrize("encoding", ["float", "base64", None])
def test_embeddings(llm: ScriptedLLM, encoding: str | None) -> None:
    c = client(llm)
    kwargs = {} if encoding is None else {"encoding_format": encoding}
    texts = ["the user likes green tea", "the user likes green tea", "tea is green", "rust cars"]
    resp = c.embeddings.create(model="e", input=texts, **kwargs)  # type: ignore[arg-type]
    vecs = [decode(d.embedding) for d in resp.data]
    assert [d.index for d in resp.data] == [0, 1, 2, 3]
    assert all(len(v) == 64 for v in vecs)
    assert all(math.isclose(cosine(v, v), 1.0, rel_tol=1e-5) for v in vecs)
    assert vecs[0] == vecs[1]
    assert cosine(vecs[0], vecs[2]) > cosine(vecs[0], vecs[3])
    assert resp.usage.prompt_tokens > 0
    assert vecs[0] == pytest.approx(embed_text(texts[0]), abs=1e-6)

    single = c.embeddings.create(model="e", input="tea", dimensions=16)
    assert len(single.data) == 1 and len(single.data[0].embedding) == 16
    assert llm.embedding_requests[-1]["input"] == "tea"


def test_models_and_base_url(llm: ScriptedLLM) -> None:
    assert llm.base_url == f"http://127.0.0.1:{llm.port}/v1"
    ids = [m.id for m in client(llm).models.list()]
    assert "scripted-llm" in ids


def test_concurrent_requests_are_all_recorded(llm: ScriptedLLM) -> None:
    c = client(llm)

    def ask(i: int) -> str:
        resp = c.chat.completions.create(model="m", messages=[{"role": "user", "content": f"{i}"}])
        return resp.choices[0].message.content or ""

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(40)))
    assert answers == ['{"facts": []}'] * 40
    assert sorted(int(r["messages"][0]["content"]) for r in llm.chat_requests) == list(range(40))


async def test_async_client(llm: ScriptedLLM) -> None:
    llm.on("async", {"ok": True})
    aclient = openai.AsyncOpenAI(base_url=llm.base_url, api_key="test")
    try:
        resp = await aclient.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "async please"}],
            response_format={"type": "json_object"},
        )
        assert json.loads(resp.choices[0].message.content or "") == {"ok": True}
        emb = await aclient.embeddings.create(model="e", input=["a b", "b c"])
        assert len(emb.data) == 2
    finally:
        await aclient.close()


def test_reset_and_restart() -> None:
    llm = ScriptedLLM(default="d")
    llm.start()
    llm.on("x", "y")
    client(llm).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    llm.reset()
    assert llm.requests == []
    resp = client(llm).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}]
    )
    assert resp.choices[0].message.content == "d"
    llm.stop()
    llm.stop()
