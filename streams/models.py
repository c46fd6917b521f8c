"""The LLM and the embedder as a memory type's stage uses them: bounded, batched, waited out.

A stage runs many records at once (`streams.concurrency`), so its calls to the models overlap:

* `BoundedChat` lets at most `max_in_flight` LLM calls of the worker run at once
  (`llm.max_in_flight`: a hosted endpoint serves many, a local CPU model one);
* `BatchedEmbedder` joins the texts that records ask to embed at the same moment into one call
  (one HTTP request to an embeddings endpoint, one matrix pass of the local model), in a thread,
  retried through outages. A batch the embedder refuses for another reason is split, so one
  record's bad text fails only that record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from handlers.ports import ChatAnswer, ChatModel, Embedder
from handlers.reconcile import Thresholds
from streams import metrics
from streams.retrying import through_outages

EMBEDDING_BATCH_TEXTS = 256
"""Texts per embedding call at most (OpenAI accepts 2,048 inputs; a local model's pass grows
with the batch)."""


@dataclass(frozen=True)
class MemoryModels:
    """The LLM and the embedder a memory type's stage uses, with the names it records."""

    llm: ChatModel
    llm_model: str
    embedder: Embedder
    thresholds: Thresholds
    questions_per_call: int = 1
    """Ambiguous memories reconciliation asks about in one LLM call
    (`memory.reconcile.questions_per_call`)."""
    extractor: str | None = None
    """The named extractor these models belong to, and its digest (recorded in provenance)."""
    extractor_digest: str | None = None
    adds_only: bool = False
    """Whether every new memory of the type is added, never reconciled with the user's (a
    custom type declared `reconcile: false`); consolidation then finds no cluster either."""


class BoundedChat:
    """A `ChatModel` that runs at most `max_in_flight` calls at once, counted
    (`streams.metrics`: calls by outcome, tokens, seconds, calls in flight)."""

    def __init__(
        self, model: ChatModel, max_in_flight: int, *, memory_type: str = "", name: str = ""
    ) -> None:
        self._model = model
        self._slots = asyncio.Semaphore(max_in_flight)
        self._labels = (memory_type, name)

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        async with self._slots:
            in_flight = metrics.LLM_IN_FLIGHT.labels(*self._labels)
            in_flight.inc()
            try:
                with metrics.timed(metrics.LLM_SECONDS.labels(*self._labels)):
                    answer = await self._model.complete_json(messages)
            except Exception as exc:
                metrics.LLM_CALLS.labels(*self._labels, type(exc).__name__).inc()
                raise
            finally:
                in_flight.dec()
        metrics.LLM_CALLS.labels(*self._labels, "answered").inc()
        metrics.LLM_TOKENS.labels(*self._labels, "prompt").inc(answer.prompt_tokens)
        metrics.LLM_TOKENS.labels(*self._labels, "completion").inc(answer.completion_tokens)
        return answer


@dataclass
class _Request:
    texts: Sequence[str]
    done: asyncio.Future[list[list[float]]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class BatchedEmbedder:
    """Embeds the texts of concurrent requests in shared calls (see the module doc)."""

    def __init__(self, embedder: Embedder, *, max_texts: int = EMBEDDING_BATCH_TEXTS) -> None:
        self.embedder = embedder
        self._max_texts = max_texts
        self._waiting: list[_Request] = []
        self._flushing: asyncio.Task[None] | None = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The vectors of `texts`, in order (an outage is waited out)."""
        if not texts:
            return []
        request = _Request(texts)
        self._waiting.append(request)
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.create_task(self._flush())
        return await request.done

    async def _flush(self) -> None:
        await asyncio.sleep(0)  # let the records that are ready now add their texts
        while self._waiting:
            batch: list[_Request] = []
            count = 0
            while self._waiting and (
                not batch or count + len(self._waiting[0].texts) <= self._max_texts
            ):
                request = self._waiting.pop(0)
                batch.append(request)
                count += len(request.texts)
            await self._embed_batch(batch)

    async def _embed_batch(self, batch: list[_Request]) -> None:
        texts = [text for request in batch for text in request.texts]
        try:
            vectors = await self._call(texts)
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch[0], exc)
                return
            for request in batch:  # find the request it refused; the others go on
                try:
                    _settle(request, await self._call(list(request.texts)))
                except Exception as single:
                    _settle(request, single)
            return
        start = 0
        for request in batch:
            _settle(request, vectors[start : start + len(request.texts)])
            start += len(request.texts)

    async def _call(self, texts: list[str]) -> list[list[float]]:
        return await through_outages(
            partial(asyncio.to_thread, self.embedder.embed, texts), f"embedding {len(texts)} texts"
        )


def _settle(request: _Request, outcome: list[list[float]] | BaseException) -> None:
    if request.done.done():
        return
    if isinstance(outcome, BaseException):
        request.done.set_exception(outcome)
    else:
        request.done.set_result(outcome)
