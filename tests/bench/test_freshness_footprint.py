"""The freshness and footprint suites' pure helpers: request attribution, LLM time, summaries."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from bench.rss import RssSampler, idle_and_peak, tree_rss
from bench.suites.freshness import Session, conversation, new_token, split
from bench.timed_llm import (
    TOKEN,
    TimedLLMServer,
    busy_seconds,
    fact_answer,
    llm_seconds,
    token_in,
)
from tests.support.scripted_llm import ScriptedLLM


def test_a_session_token_is_found_in_its_chat_and_embedding_requests() -> None:
    token = new_token()
    assert TOKEN.fullmatch(token)
    chat = {"messages": [{"role": "user", "content": conversation(token)[2]["content"]}]}
    assert token_in(chat) == token
    assert token_in({"input": [f"The user's locker code is {token}."]}) == token
    assert token_in({"input": "what is the user's locker code?"}) is None


def test_the_scripted_answer_is_one_fact_carrying_the_token_and_none_without_one() -> None:
    token = new_token()
    answer = fact_answer({"messages": [{"role": "user", "content": f"code {token}"}]})
    assert [fact["statement"] for fact in answer["facts"]] == [
        f"The user's locker code is {token}."
    ]
    assert fact_answer({"messages": [{"role": "user", "content": "hello"}]}) == {"facts": []}


def test_busy_seconds_counts_overlapping_requests_once() -> None:
    assert busy_seconds([]) == 0
    assert busy_seconds([(0.0, 1.0), (0.5, 1.5), (3.0, 4.0)]) == pytest.approx(2.5)
    assert busy_seconds([(2.0, 3.0), (0.0, 1.0)]) == pytest.approx(2.0)
    assert busy_seconds([(0.0, 4.0), (1.0, 2.0)]) == pytest.approx(4.0)


def test_llm_seconds_are_the_sessions_own_requests_of_the_kinds_asked() -> None:
    entries = [
        {"kind": "chat", "start": 0.0, "end": 0.5, "token": "zqaaaaaaaa"},
        {"kind": "embeddings", "start": 0.6, "end": 0.7, "token": "zqaaaaaaaa"},
        {"kind": "chat", "start": 0.0, "end": 2.0, "token": "zqbbbbbbbb"},
        {"kind": "embeddings", "start": 0.0, "end": 9.0, "token": None},
    ]
    assert llm_seconds(entries, "zqaaaaaaaa") == pytest.approx(0.6)
    assert llm_seconds(entries, "zqaaaaaaaa", kinds=("chat",)) == pytest.approx(0.5)
    assert llm_seconds(entries, "zqcccccccc") == 0


def test_split_reports_the_llm_share_and_the_rest_as_pipeline_overhead() -> None:
    result = split([2.0, 4.0], [0.5, 0.5])
    assert result["total"]["p50"] == pytest.approx(3.0)
    assert result["overhead"]["p50"] == pytest.approx(2.5)
    assert result["llm_share"] == pytest.approx(1.0 / 6.0)


def test_every_session_has_its_own_user_and_token() -> None:
    first, second = Session(), Session()
    assert first.token != second.token and first.user_id != second.user_id
    assert first.token in first.user_id
    assert any(first.token in message["content"] for message in first.messages)


def test_idle_is_the_median_and_load_the_peak_with_their_total() -> None:
    samples = {"window": [100.0, 110.0, 300.0], "broker": [50.0, 60.0, 55.0]}
    assert idle_and_peak(samples, peak=False) == {"window": 110.0, "broker": 55.0, "total": 165.0}
    assert idle_and_peak(samples, peak=True) == {"window": 300.0, "broker": 60.0, "total": 360.0}


def test_rss_of_this_process_is_sampled_and_a_gone_process_has_none() -> None:
    own = tree_rss(os.getpid())
    assert own is not None and own > 1
    with RssSampler({"me": os.getpid()}, interval=0.01) as sampler:
        pass
    assert sampler.samples["me"]
    assert tree_rss(2**22 + 12345) is None


def test_the_timed_server_answers_scripted_then_forwards_chat_to_a_real_server(
    tmp_path: Path,
) -> None:
    token = new_token()
    chat = {"model": "scripted-llm", "messages": [{"role": "user", "content": f"I am {token}"}]}
    with (
        ScriptedLLM(default={"facts": ["from upstream"]}) as upstream,
        TimedLLMServer(tmp_path, chat_delay=0.05) as server,
    ):
        scripted = _post(f"{server.base_url}/chat/completions", chat)
        assert token in scripted["choices"][0]["message"]["content"]
        with server.forwarding(upstream.base_url, "the-real-model"):
            forwarded = _post(f"{server.base_url}/chat/completions", chat)
        assert "from upstream" in forwarded["choices"][0]["message"]["content"]
        assert upstream.chat_requests[0]["model"] == "the-real-model"
        entries = server.entries()
    assert [(e["kind"], e["token"]) for e in entries] == [("chat", token), ("chat", token)]
    assert entries[0]["end"] - entries[0]["start"] >= 0.05


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer
