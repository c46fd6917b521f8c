"""The outside services handlers depend on, as protocols; implementations are passed in."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from events.memories import MemoryType
    from handlers.known_memory import KnownMemory, KnownMemoryFacts
    from handlers.rollback import StoredVersion
    from handlers.sealing import DataKey, KeyScope


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

    def memory_facts(
        self, user_id: str, memory_type: MemoryType, *, retired: bool = False
    ) -> list[KnownMemoryFacts]:
        """The user's current memories of `memory_type` without content (with `retired`, the
        memories a consolidation retired too: forgetting a session or a user erases them)."""
        ...

    def extraction_holder(self, snapshot_id: str, memory_type: MemoryType) -> str | None:
        """The id of the result holding the snapshot's extraction of `memory_type`, if any."""
        ...

    def extraction_failure(self, snapshot_id: str, memory_type: MemoryType) -> str | None:
        """The failure of the result holding the snapshot's extraction of `memory_type`, if
        that result failed."""
        ...

    def save_projected(self, result_id: str) -> bool: ...

    def forget_projected(self, request_id: str, fact_id: str) -> bool: ...

    def memory_versions(self, memory_id: str) -> list[StoredVersion]:
        """Every stored version of `memory_id`, whoever's (a rollback checks it is the user's)."""
        ...

    def rollback_projected(self, result_id: str) -> bool: ...

    def consolidation_projected(self, result_id: str) -> bool:
        """Whether a consolidation's result (one per request and type) is projected."""
        ...

    def due_memories(self, memory_type: MemoryType, now: datetime) -> list[KnownMemoryFacts]:
        """Current memories whose version expires at or before `now`."""
        ...


@dataclass(frozen=True)
class KeyRecord:
    """What a key store says about a data key, without its material."""

    key_id: str
    scope: KeyScope
    owner: str
    subject: str | None
    generation: int
    created_at: datetime
    destroyed_at: datetime | None
    kek: str | None = None
    """The master key that wraps it (None: stored unwrapped, or destroyed)."""


class DataKeys(Protocol):
    """The data keys content is sealed with (docs/architecture.md, "Crypto-shredding"): the
    port every sealing reader and writer goes through. Blocking calls (async code makes them in
    a thread, `handlers.key_ring.with_keys`); `memstream.keystore` has the implementations,
    held to one contract (tests/memstream/keystore/test_contract.py).

    Every implementation keeps these promises: a key id is a function of (scope, owner,
    subject, generation) (`handlers.sealing.data_key_id`); stores over the same keys that
    create one key at once end with the same material; a destroyed key is never returned again
    by the store that destroyed it, and content recorded later under the same subject gets the
    next generation; an id never stored is `UnknownKey`, not destroyed."""

    def prepare(self) -> None:
        """Make the store ready to serve (idempotent): indexes, for a database."""
        ...

    def current(self, scope: KeyScope, owner: str, subject: str | None = None) -> DataKey:
        """The live key new content of (scope, owner, subject) is sealed with: the newest
        generation, created when there is none or the newest was destroyed."""
        ...

    def key(self, key_id: str) -> DataKey | None:
        """The key `key_id` names; None once destroyed; `UnknownKey` if never stored."""
        ...

    def load(self, key_ids: Iterable[str]) -> None:
        """Bring the keys of `key_ids` into memory at once (`UnknownKey` for one never stored)."""
        ...

    def cached_key(self, key_id: str) -> tuple[bool, DataKey | None]:
        """(True, the key or None once destroyed) when the answer needs no lookup; else
        (False, None)."""
        ...

    def cached_current(self, scope: KeyScope, owner: str, subject: str | None) -> DataKey | None:
        """The live key `current` would answer, if it needs no lookup (else None)."""
        ...

    def records(self, owner: str) -> list[KeyRecord]:
        """Every key of `owner`, live and destroyed, sorted by scope, subject, generation."""
        ...

    def destroy(
        self,
        owner: str,
        scope: KeyScope | None = None,
        subject: str | None = None,
        *,
        created_until: datetime | None = None,
    ) -> tuple[str, ...]:
        """Destroy `owner`'s keys (all, one scope's, or one subject's) created at or before
        `created_until` (all when None); the sorted ids of the live keys this call destroyed."""
        ...
