"""The models as a stage uses them: LLM calls bounded per worker, embeddings batched."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from handlers.ports import ChatAnswer, EmbeddingUnavailable
from streams.models import BatchedEmbedder, BoundedChat


class SlowChat:
    def __init__(self) -> None:
        self.running = 0
        self.most = 0

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        self.running += 1
        self.most = max(self.most, self.running)
        await asyncio.sleep(0.01)
        self.running -= 1
        return ChatAnswer(text="{}")


class CountingEmbedder:
    model_name = "counting"
    dimension = 1

    def __init__(self, refuse: str | None = None, outages: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.refuse = refuse
        self.outages = outages

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.outages:
            self.outages -= 1
            raise EmbeddingUnavailable("down for a moment")
        if self.refuse is not None and self.refuse in texts:
            raise ValueError(f"cannot embed {self.refuse!r}")
        return [[float(len(text))] for text in texts]


def test_no_more_llm_calls_than_the_limit_run_at_once() -> None:
    chat = SlowChat()
    bounded = BoundedChat(chat, max_in_flight=3)

    async def run() -> None:
        await asyncio.gather(*(bounded.complete_json([]) for _ in range(12)))

    asyncio.run(run())
    assert chat.most == 3


def test_concurrent_requests_share_one_embedding_call_and_get_their_own_vectors() -> None:
    embedder = CountingEmbedder()
    batched = BatchedEmbedder(embedder)

    async def run() -> list[list[list[float]]]:
        return await asyncio.gather(
            batched.embed(["a"]), batched.embed(["bb", "ccc"]), batched.embed(["dddd"])
        )

    assert asyncio.run(run()) == [[[1.0]], [[2.0], [3.0]], [[4.0]]]
    assert embedder.calls == [["a", "bb", "ccc", "dddd"]]


def test_a_batch_is_split_at_the_text_limit() -> None:
    embedder = CountingEmbedder()
    batched = BatchedEmbedder(embedder, max_texts=2)

    async def run() -> None:
        await asyncio.gather(*(batched.embed([str(n)]) for n in range(5)))

    asyncio.run(run())
    assert [len(call) for call in embedder.calls] == [2, 2, 1]


def test_a_text_the_embedder_refuses_fails_only_its_own_request() -> None:
    embedder = CountingEmbedder(refuse="bad")
    batched = BatchedEmbedder(embedder)

    async def run() -> list[object]:
        return await asyncio.gather(
            batched.embed(["good"]), batched.embed(["bad"]), return_exceptions=True
        )

    good, bad = asyncio.run(run())
    assert good == [[4.0]]
    assert isinstance(bad, ValueError)


def test_an_embedder_outage_is_waited_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("streams.retrying.INITIAL_BACKOFF_SECONDS", 0.01)
    embedder = CountingEmbedder(outages=2)
    batched = BatchedEmbedder(embedder)
    assert asyncio.run(batched.embed(["abc"])) == [[3.0]]
    assert len(embedder.calls) == 3
