"""Corrections an operator asks for through the SDK: a memory rolled back to an earlier version
(docs/architecture.md, "Rollback") and a user's memories consolidated ("Consolidation")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from events.consolidations import DEFAULT_MAX_CALLS, MemoryConsolidationRequested
from events.memories import MemoryType
from events.rollbacks import MemoryRollbackRequested
from memstream.sdk.client_base import POLL_SECONDS, ClientBase, MemoryNotFound
from memstream.sdk.memory_types import known_types
from memstream.sdk.results import (
    Consolidation,
    Rollback,
    consolidation_complete,
)


class CorrectionCalls(ClientBase):
    """`rollback` and `consolidate`, and their results."""

    # -- rollback ------------------------------------------------------------------------------

    async def rollback(
        self, user_id: str, memory_id: str, to_version: int, *, requested_by: str, reason: str = ""
    ) -> str:
        """Restore one of the user's memories to its version `to_version`; returns the request
        id. The memory's stage writes the next version with that version's text, vector and
        expiry, in order with the user's snapshots and saves, or refuses (an unknown version,
        the current one, an expired memory): `rollback_result` tells which. `requested_by`
        (who) and `reason` (why) are kept with it and shown by `history`. Raises
        `MemoryNotFound` (nothing is sent) when the read model has no such memory for the
        user."""
        user = self._memory_user(user_id)
        memory_type = await (await self._reads()).memory_type_of(user, memory_id)
        if memory_type is None:
            raise MemoryNotFound(f"user {user!r} has no memory {memory_id!r}")
        request = MemoryRollbackRequested(
            event_id=self._new_id(),
            occurred_at=self._clock(),
            user_id=user,
            memory_type=memory_type,
            memory_id=memory_id,
            to_version=to_version,
            requested_by=requested_by,
            reason=reason,
            principal=self.principal,
        )
        await self._producer.append(self._topics.snapshots, [request])
        return request.event_id

    async def rollback_result(self, user_id: str, rollback_id: str) -> Rollback | None:
        """What the rollback `rollback_id` did (None: not decided and projected yet)."""
        return await (await self._reads()).rollback(self._memory_user(user_id), rollback_id)

    async def wait_for_rollback(
        self, user_id: str, rollback_id: str, timeout: float = 60.0
    ) -> Rollback:
        """The rollback's result once projected; `TimeoutError` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while (found := await self.rollback_result(user_id, rollback_id)) is None:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"rollback {rollback_id} not decided after {timeout:.0f}s")
            await asyncio.sleep(POLL_SECONDS)
        return found

    # -- consolidation -------------------------------------------------------------------------

    async def consolidate(
        self,
        user_id: str,
        *,
        memory_types: Sequence[MemoryType] | None = None,
        max_calls: int = DEFAULT_MAX_CALLS,
        requested_by: str,
        reason: str = "",
    ) -> str:
        """Consolidate the user's current memories of `memory_types` (None: every enabled
        type); returns the request id. Each type's stage finds clusters of near-duplicate or
        contradicting memories of one subject, asks the LLM once per cluster (at most
        `max_calls` calls per type) and merges or supersedes them, in order with the user's
        snapshots and saves: `consolidation_result` tells what it did and what it cost.
        `requested_by` (who) and `reason` (why) are kept with it."""
        types = known_types(self.settings, memory_types or self.settings.memory.extraction.enabled)
        request = MemoryConsolidationRequested(
            event_id=self._new_id(),
            occurred_at=self._clock(),
            user_id=self._memory_user(user_id),
            memory_types=types,
            requested_by=requested_by,
            reason=reason,
            max_calls=max_calls,
            principal=self.principal,
        )
        await self._producer.append(self._topics.snapshots, [request])
        return request.event_id

    async def consolidation_result(
        self, user_id: str, consolidation_id: str
    ) -> list[Consolidation]:
        """The runs of the consolidation `consolidation_id` decided and projected so far, one
        per memory type."""
        return await (await self._reads()).consolidation(
            self._memory_user(user_id), consolidation_id
        )

    async def wait_for_consolidation(
        self, user_id: str, consolidation_id: str, timeout: float = 60.0
    ) -> list[Consolidation]:
        """Every type's run once projected; `TimeoutError` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            runs = await self.consolidation_result(user_id, consolidation_id)
            if runs and consolidation_complete(runs):
                return runs
            if time.monotonic() >= deadline:
                done = [run["memory_type"] for run in runs]
                raise TimeoutError(
                    f"consolidation {consolidation_id} not decided after {timeout:.0f}s "
                    f"(done: {done or 'no type'})"
                )
            await asyncio.sleep(POLL_SECONDS)
