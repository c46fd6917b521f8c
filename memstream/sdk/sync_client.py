"""The SDK for code without an event loop: `MemoryClient`'s calls, blocking.

    with SyncMemoryClient(load_settings()) as memory:
        memory.record("tim", "s1", [{"role": "user", "content": "I work at Stripe."}])
        memory.search("tim", "where does Tim work?")

One implementation: every call runs the async `MemoryClient`'s method on an event loop of the
client's own, in a background thread, and waits for its result.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar, Unpack

from events.consolidations import DEFAULT_MAX_CALLS
from events.memories import MemoryEvent, MemoryType
from events.turns import TurnRecorded
from handlers.search import SearchMode
from memstream.config import Settings
from memstream.sdk.client import MemoryClient
from memstream.sdk.results import (
    Consolidation,
    ErasureReceipt,
    LlmUsage,
    Memory,
    MemoryVersion,
    Profile,
    Rollback,
    Save,
    SearchHit,
    Snapshot,
    Turn,
)
from memstream.sdk.search_filters import SearchFilters

T = TypeVar("T")


class SyncMemoryClient:
    """Blocking twin of `MemoryClient` (same arguments, same results)."""

    def __init__(self, settings: Settings, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="memstream-sdk", daemon=True
        )
        self._thread.start()
        self.client = self._run(self._created(settings, options))

    @staticmethod
    async def _created(settings: Settings, options: dict[str, Any]) -> MemoryClient:
        return MemoryClient(settings, **options)  # built on the client's own loop

    def __enter__(self) -> SyncMemoryClient:
        self._run(self.client.start())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._run(self.client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    # -- the calls of MemoryClient --------------------------------------------------------------

    def record(
        self, user_id: str, session_id: str, messages: Sequence[Mapping[str, Any]], **options: Any
    ) -> list[TurnRecorded]:
        self._run(self.client.start())
        return self._run(self.client.record(user_id, session_id, messages, **options))

    def flush(self, user_id: str, session_id: str) -> None:
        self._run(self.client.start())
        self._run(self.client.flush(user_id, session_id))

    def save(self, user_id: str, memory_type: MemoryType, text: str, **options: Any) -> str:
        self._run(self.client.start())
        return self._run(self.client.save(user_id, memory_type, text, **options))

    def forget(self, user_id: str, memory_id: str, *, reason: str = "") -> str:
        self._run(self.client.start())
        return self._run(self.client.forget(user_id, memory_id, reason=reason))

    def forget_session(self, user_id: str, session_id: str, *, reason: str = "") -> str:
        self._run(self.client.start())
        return self._run(self.client.forget_session(user_id, session_id, reason=reason))

    def forget_user(self, user_id: str, *, reason: str = "") -> str:
        self._run(self.client.start())
        return self._run(self.client.forget_user(user_id, reason=reason))

    def erasures(self, user_id: str) -> list[ErasureReceipt]:
        return self._run(self.client.erasures(user_id))

    def erasure(self, request_id: str) -> ErasureReceipt | None:
        return self._run(self.client.erasure(request_id))

    def wait_for_erasure(self, request_id: str, timeout: float = 60.0) -> ErasureReceipt:
        return self._run(self.client.wait_for_erasure(request_id, timeout))

    def rollback(
        self, user_id: str, memory_id: str, to_version: int, *, requested_by: str, reason: str = ""
    ) -> str:
        return self._run(
            self.client.rollback(
                user_id, memory_id, to_version, requested_by=requested_by, reason=reason
            )
        )

    def rollback_result(self, user_id: str, rollback_id: str) -> Rollback | None:
        return self._run(self.client.rollback_result(user_id, rollback_id))

    def wait_for_rollback(self, user_id: str, rollback_id: str, timeout: float = 60.0) -> Rollback:
        return self._run(self.client.wait_for_rollback(user_id, rollback_id, timeout))

    def consolidate(
        self,
        user_id: str,
        *,
        memory_types: Sequence[MemoryType] | None = None,
        max_calls: int = DEFAULT_MAX_CALLS,
        requested_by: str,
        reason: str = "",
    ) -> str:
        return self._run(
            self.client.consolidate(
                user_id,
                memory_types=memory_types,
                max_calls=max_calls,
                requested_by=requested_by,
                reason=reason,
            )
        )

    def consolidation_result(self, user_id: str, consolidation_id: str) -> list[Consolidation]:
        return self._run(self.client.consolidation_result(user_id, consolidation_id))

    def wait_for_consolidation(
        self, user_id: str, consolidation_id: str, timeout: float = 60.0
    ) -> list[Consolidation]:
        return self._run(self.client.wait_for_consolidation(user_id, consolidation_id, timeout))

    def memories(self, user_id: str, **options: Any) -> list[Memory]:
        return self._run(self.client.memories(user_id, **options))

    def history(self, user_id: str, memory_id: str) -> list[MemoryVersion]:
        return self._run(self.client.history(user_id, memory_id))

    def search(
        self,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        mode: SearchMode = "hybrid",
        **filters: Unpack[SearchFilters],
    ) -> list[SearchHit]:
        return self._run(self.client.search(user_id, query, limit=limit, mode=mode, **filters))

    def build_context(self, user_id: str, query: str, **options: Any) -> str:
        return self._run(self.client.build_context(user_id, query, **options))

    def recent_turns(self, user_id: str, session_id: str, **options: Any) -> list[Turn]:
        return self._run(self.client.recent_turns(user_id, session_id, **options))

    def session_history(self, user_id: str, session_id: str, **options: Any) -> str:
        return self._run(self.client.session_history(user_id, session_id, **options))

    def snapshots(self, user_id: str, session_id: str | None = None) -> list[Snapshot]:
        return self._run(self.client.snapshots(user_id, session_id))

    def saves(self, user_id: str) -> list[Save]:
        return self._run(self.client.saves(user_id))

    def profile(self, user_id: str) -> Profile | None:
        return self._run(self.client.profile(user_id))

    def llm_usage(self, user_id: str) -> dict[str, LlmUsage]:
        return self._run(self.client.llm_usage(user_id))

    def events(self, user_id: str, *, since: int | datetime | None = None) -> list[MemoryEvent]:
        """The user's memory events so far (no `follow`: a blocking call must end)."""

        async def collected() -> list[MemoryEvent]:
            return [event async for event in self.client.events(user_id, since=since)]

        return self._run(collected())
