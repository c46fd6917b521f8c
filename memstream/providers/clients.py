"""Clients for the LLM and the embedder, built from settings and passed into the stream apps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import openai

from handlers.ports import ChatAnswer, ChatModel, Embedder, EmbeddingUnavailable, LLMUnavailable
from memstream.config import EmbeddingSettings, LLMSettings

RETRYABLE = (
    openai.APIConnectionError,  # includes timeouts
    openai.RateLimitError,  # HTTP 429: waited out, at least as long as its Retry-After says
    openai.InternalServerError,
    # Misconfiguration (bad key, unknown model) is fixed by an operator, not by the snapshot:
    # wait for the fix instead of dead-lettering every snapshot in the meantime.
    openai.AuthenticationError,
    openai.PermissionDeniedError,
    openai.NotFoundError,
)
"""Errors that say nothing about the request itself: retried, never dead-lettered."""


def retry_after(exc: Exception) -> float | None:
    """The seconds an HTTP error's `Retry-After` (or OpenAI's `retry-after-ms`) asks us to wait
    before trying again; None without one (or with an HTTP date, which we do not parse)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None


class MissingProvider(RuntimeError):
    """A required provider is not configured; the message says exactly what to set."""


class OpenAIChatModel:
    """Any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp server …)."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str,
        timeout: float = 120.0,
        max_tokens: int = 1024,
        temperature: float = 0.0,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._client = openai.AsyncOpenAI(
            # No client-side retries: an abandoned request keeps a local server busy; the
            # extraction stage retries unreachable LLMs itself, with back-off.
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout,
            max_retries=0,
        )

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        try:
            response = await self._client.chat.completions.create(
                model=self.model,
                messages=cast(Any, list(messages)),
                response_format={"type": "json_object"},
                temperature=self.temperature,
                max_tokens=self.max_tokens,
            )
        except RETRYABLE as exc:
            message = f"{type(exc).__name__}: {exc}"
            raise LLMUnavailable(message, retry_after=retry_after(exc)) from exc
        usage = response.usage
        return ChatAnswer(
            text=response.choices[0].message.content or "",
            model=response.model or self.model,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )

    async def aclose(self) -> None:
        """Close the HTTP connections (before the event loop they were opened in ends)."""
        await self._client.close()


class OpenAIEmbedder:
    """Any OpenAI-compatible embeddings endpoint."""

    def __init__(
        self, *, base_url: str | None, api_key: str | None, model: str, dimension: int | None = None
    ) -> None:
        self.model = model
        self.model_name = model
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed")
        self.dimension = dimension or len(self.embed(["dimension probe"])[0])

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            response = self._client.embeddings.create(model=self.model, input=list(texts))
        except RETRYABLE as exc:
            message = f"{type(exc).__name__}: {exc}"
            raise EmbeddingUnavailable(message, retry_after=retry_after(exc)) from exc
        return [list(item.embedding) for item in sorted(response.data, key=lambda d: d.index)]


def chat_model(settings: LLMSettings) -> ChatModel:
    """The configured remote LLM, or `MissingProvider` naming what to set."""
    missing = settings.missing()
    if missing or settings.model is None:
        raise MissingProvider("no LLM provider configured: set " + " and ".join(missing))
    return OpenAIChatModel(
        base_url=settings.base_url,
        api_key=settings.api_key,
        model=settings.model,
        timeout=settings.timeout_seconds,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
    )


def embedder(settings: EmbeddingSettings, llm: LLMSettings) -> Embedder:
    """The configured embedder: the local model by default, or an OpenAI-compatible endpoint."""
    if settings.provider == "openai":
        if not settings.model:
            raise MissingProvider("embedding.provider is openai: set MEMSTREAM_EMBEDDING_MODEL")
        return OpenAIEmbedder(
            base_url=settings.base_url or llm.base_url,
            api_key=settings.api_key or llm.api_key,
            model=settings.model,
        )
    from memstream.providers.local_embedder import load_local_embedder

    return load_local_embedder()
