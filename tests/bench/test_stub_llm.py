"""The scale benchmarks' stub LLM: answers every real extraction prompt validly, counts requests
and how many were in flight at once, and answers them all after the same delay."""

from __future__ import annotations

import asyncio
import base64
import struct
import time
from datetime import UTC, datetime

from aiohttp.test_utils import TestClient, TestServer

from bench.scale_extraction import bare_client
from bench.scale_workload import conversation, history_snapshot, token_for
from bench.stub_llm import (
    StubConfig,
    Tally,
    asked_about,
    calls_made,
    chat_answer,
    embedding,
    embeddings_answer,
    make_app,
    subjects,
)
from events.memories import MEMORY_TYPES
from events.snapshots import SnapshotPromoted, SnapshotTurn, snapshot_id
from handlers import reconcile_prompt
from handlers.extraction.registry import extractor_for
from handlers.reconcile import NewMemory
from tests.support.extraction_requests import EMPTY_ANSWERS

NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)
TOKEN = token_for("test", 1)


def _snapshot(messages: list[dict[str, str]]) -> SnapshotPromoted:
    turns = tuple(
        SnapshotTurn(turn_id=f"t{i}", role=m["role"], content=m["content"], occurred_at=NOW)  # type: ignore[arg-type]
        for i, m in enumerate(messages)
    )
    return SnapshotPromoted(
        event_id=snapshot_id("u1", "s1", [t.turn_id for t in turns]),
        occurred_at=NOW,
        user_id="u1",
        session_id="s1",
        seq=0,
        reason="flush",
        turns=turns,
    )


def _body(messages: list[dict[str, str]]) -> dict[str, object]:
    return {"model": "stub-llm", "messages": messages}


def test_each_extraction_prompt_is_recognised_by_its_memory_type() -> None:
    snapshot = _snapshot(conversation(TOKEN))
    for memory_type in MEMORY_TYPES:
        assert asked_about(_body(extractor_for(memory_type).prompt(snapshot))) == memory_type


def test_the_semantic_answer_parses_into_one_fact_about_the_sessions_token() -> None:
    snapshot = _snapshot(conversation(TOKEN))
    extractor = extractor_for("semantic")
    answer = chat_answer(_body(extractor.prompt(snapshot)), facts=1)
    memories = extractor.parse(_json(answer), snapshot)
    assert [memory.text for memory in memories] == [f"The user's locker code is {TOKEN}."]


def test_the_semantic_answer_of_a_history_snapshot_parses_into_every_fact_asked_for() -> None:
    snapshot = history_snapshot("u1", "h0", TOKEN, NOW).snapshot
    extractor = extractor_for("semantic")
    answer = chat_answer(_body(extractor.prompt(snapshot)), facts=20)
    memories = extractor.parse(_json(answer), snapshot)
    assert len(memories) == 20
    assert len({memory.text for memory in memories}) == 20
    assert all(TOKEN in memory.text for memory in memories)


def test_the_other_types_get_their_empty_answer_which_their_extractor_accepts() -> None:
    snapshot = _snapshot(conversation(TOKEN))
    for memory_type in ("episodic", "procedural", "taxonomic"):
        extractor = extractor_for(memory_type)  # type: ignore[arg-type]
        answer = chat_answer(_body(extractor.prompt(snapshot)), facts=3)
        assert answer == EMPTY_ANSWERS[memory_type]
        assert extractor.parse(_json(answer), snapshot) == []


def test_a_reconciliation_question_is_answered_with_an_add() -> None:
    memory = extractor_for("semantic").parse(
        _json({"facts": [{"subject": "the user", "statement": f"The user's code is {TOKEN}."}]}),
        _snapshot(conversation(TOKEN)),
    )[0]
    messages = reconcile_prompt.prompt(NewMemory(memory, (1.0,)), [])
    assert asked_about(_body(messages)) == "reconcile"
    assert reconcile_prompt.parse(_json(chat_answer(_body(messages), 1)), []).action == "ADD"


def test_an_unknown_prompt_gets_an_empty_object_and_is_counted_as_unknown() -> None:
    body = _body([{"role": "system", "content": "Tell me a joke."}])
    assert asked_about(body) == "unknown"
    assert chat_answer(body, 1) == {}


def test_embeddings_are_unit_vectors_fixed_by_the_text_and_far_apart_for_other_texts() -> None:
    first, again, other = embedding("a fact"), embedding("a fact"), embedding("another fact")
    assert first == again
    assert abs(sum(x * x for x in first) - 1.0) < 1e-9
    assert abs(sum(a * b for a, b in zip(first, other, strict=True))) < 0.3
    assert len(first) == 384


def test_base64_embeddings_decode_to_the_same_vector() -> None:
    answer = embeddings_answer({"input": ["x", "y"], "encoding_format": "base64", "dimensions": 8})
    encoded = answer["data"][1]["embedding"]
    decoded = struct.unpack("<8f", base64.b64decode(encoded))
    assert [round(v, 5) for v in decoded] == [round(v, 5) for v in embedding("y", 8)]


def test_the_tally_counts_requests_and_the_most_in_flight_at_once() -> None:
    tally = Tally()
    tally.begin("chat", "semantic", now=1.0)
    tally.begin("chat", "episodic", now=1.1)
    tally.end("chat", now=2.0)
    tally.begin("embeddings", now=2.1)
    tally.end("embeddings", now=2.2)
    tally.end("chat", now=2.5)
    stats = tally.to_json()
    assert calls_made(stats) == {"chat": 2, "embeddings": 1}
    assert subjects(stats) == {"semantic": 1, "episodic": 1}
    assert stats["max_in_flight"] == {"chat": 2, "all": 2, "embeddings": 1}
    assert (stats["first_start"], stats["last_end"]) == (1.0, 2.5)


def test_a_reset_forgets_counts_but_keeps_requests_still_in_flight() -> None:
    tally = Tally()
    tally.begin("chat", "semantic")
    tally.begin("chat", "semantic")
    tally.end("chat")
    tally.reset()
    assert calls_made(tally.to_json()) == {"chat": 0, "embeddings": 0}
    assert tally.max_in_flight == {"chat": 1, "all": 1}


def test_stub_config_changes_only_what_it_is_given() -> None:
    config = StubConfig(chat_delay=1.0, facts=1)
    config.update({"facts": 20})
    assert (config.chat_delay, config.embed_delay, config.facts) == (1.0, 0.0, 20)


async def test_the_server_answers_concurrent_requests_after_one_delay_and_counts_them() -> None:
    prompt = extractor_for("semantic").prompt(_snapshot(conversation(TOKEN)))
    async with TestClient(TestServer(make_app(StubConfig(chat_delay=0.3)))) as client:
        started = time.perf_counter()
        answers = await asyncio.gather(
            *(client.post("/v1/chat/completions", json=_body(prompt)) for _ in range(20))
        )
        elapsed = time.perf_counter() - started
        assert all(answer.status == 200 for answer in answers)
        assert 0.3 <= elapsed < 2.0  # one delay for all of them, not twenty
        embedded = await client.post("/v1/embeddings", json={"input": "x"})
        assert len((await embedded.json())["data"][0]["embedding"]) == 384
        stats = await (await client.get("/stub/stats")).json()
        assert calls_made(stats) == {"chat": 20, "embeddings": 1}
        assert stats["max_in_flight"]["chat"] == 20
        bodies = await (await client.get("/stub/requests")).json()
        assert len(bodies["chat"]) == 20
        await client.post("/stub/reset", json={})
        assert calls_made(await (await client.get("/stub/stats")).json())["chat"] == 0


async def test_the_bare_client_resends_every_body_with_at_most_its_limit_in_flight() -> None:
    prompt = extractor_for("semantic").prompt(_snapshot(conversation(TOKEN)))
    async with TestClient(TestServer(make_app(StubConfig(chat_delay=0.1)))) as client:
        base = str(client.make_url("/v1"))
        bodies = {"chat": [_body(prompt)] * 12, "embeddings": [{"input": ["x"]}] * 3}
        sent = await bare_client(base, bodies, limit=4)
        stats = await (await client.get("/stub/stats")).json()
    assert calls_made(stats) == {"chat": 12, "embeddings": 3}
    assert stats["max_in_flight"]["all"] == 4
    assert sent["seconds"] >= 0.3  # 12 calls of 0.1 s, 4 at a time


def _json(value: object) -> str:
    import json

    return json.dumps(value)
