"""The outside services handlers depend on, as protocols; implementations are passed in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ChatAnswer:
    """What an LLM answered (`text`), which model answered, and the tokens it counted."""

    text: str
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatModel(Protocol):
    """An LLM that answers a chat conversation with a JSON object (as text)."""

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer: ...


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors of `dimension` floats; `model_name` identifies the
    vector space (vectors of different models are never compared)."""

    model_name: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class ProviderUnavailable(RuntimeError):
    """A model provider cannot answer now (unreachable, overloaded, misconfigured): retry later."""


class LLMUnavailable(ProviderUnavailable):
    """The LLM could not be reached or answered with a server error; worth retrying later."""


class EmbeddingUnavailable(ProviderUnavailable):
    """The embedding provider could not be reached; worth retrying later."""
