"""The outside services handlers depend on, as protocols; implementations are passed in."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from events.memories import MemoryType
    from handlers.reconcile import KnownMemory, KnownMemoryFacts


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
    """A model provider cannot answer now (unreachable, overloaded, misconfigured): retry later,
    not before `retry_after` seconds when the provider said so (HTTP 429/503 `Retry-After`)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LLMUnavailable(ProviderUnavailable):
    """The LLM could not be reached or answered with a server error; worth retrying later."""


class EmbeddingUnavailable(ProviderUnavailable):
    """The embedding provider could not be reached; worth retrying later."""


class StageReadModel(Protocol):
    """What a memory type's stage reads of the projected read model (blocking calls, made in a
    thread): a user's current memories, and whether its results and forget facts are projected
    (docs/architecture.md, "Reconciliation")."""

    def projected_offsets(self, partitions: Collection[int]) -> dict[int, int | None]:
        """How far the projector applied each memories-topic partition (None: nothing)."""
        ...

    def current_memories(self, user_id: str, memory_type: MemoryType) -> list[KnownMemory]: ...

    def memory_facts(self, user_id: str, memory_type: MemoryType) -> list[KnownMemoryFacts]: ...

    def extraction_holder(self, snapshot_id: str, memory_type: MemoryType) -> str | None:
        """The id of the result holding the snapshot's extraction of `memory_type`, if any."""
        ...

    def save_projected(self, result_id: str) -> bool: ...

    def forget_projected(self, request_id: str, fact_id: str) -> bool: ...

    def due_memories(self, memory_type: MemoryType, now: datetime) -> list[KnownMemoryFacts]:
        """Current memories whose version expires at or before `now`."""
        ...
