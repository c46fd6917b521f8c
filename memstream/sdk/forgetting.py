"""Forgetting through the SDK: a request written to the log, carried out by the stages in order
with everything before it, and its receipt (docs/architecture.md, "Forgetting")."""

from __future__ import annotations

import asyncio
import time
from typing import cast

from events.forgetting import MemoryForgotten, SessionForgotten, UserForgotten
from handlers.erasure_receipts import with_progress
from handlers.identity import resolve_scope, whole_user_erasure
from memstream.sdk.client_base import POLL_SECONDS, ClientBase, MemoryNotFound
from memstream.sdk.results import ErasureReceipt


class ForgettingCalls(ClientBase):
    """`forget`, `forget_session`, `forget_user` and their receipts."""

    async def forget(self, user_id: str, memory_id: str, *, reason: str = "") -> str:
        """Forget one of the user's memories, every version of it; returns the request id.

        Raises `MemoryNotFound` (nothing is sent) when the read model has no such memory for
        the user — also once it has been forgotten."""
        user = self._memory_user(user_id)
        memory_type = await (await self._reads()).memory_type_of(user, memory_id)
        if memory_type is None:
            raise MemoryNotFound(f"user {user!r} has no memory {memory_id!r}")
        request = MemoryForgotten(
            event_id=self._new_id(),
            occurred_at=self._clock(),
            user_id=user,
            requested_by=self.requested_by,
            reason=reason,
            memory_id=memory_id,
            memory_type=memory_type,
        )
        await self._producer.append(self._topics.snapshots, [request])
        return request.event_id

    async def forget_session(self, user_id: str, session_id: str, *, reason: str = "") -> str:
        """Forget a session: its turns, snapshots and the memories it contributed a version
        to; returns the request id. A session with no data is forgotten all the same (the
        receipt then counts nothing)."""
        request = SessionForgotten(
            event_id=self._new_id(),
            occurred_at=self._clock(),
            user_id=self._memory_user(user_id),
            requested_by=self.requested_by,
            reason=reason,
            session_id=session_id,
        )
        await self._producer.append(self._topics.turns, [request])
        return request.event_id

    async def forget_user(self, user_id: str, *, reason: str = "") -> str:
        """Forget everything of a user; returns the request id.

        One `UserForgotten` per turns-topic partition (each window partition forgets the
        user's sessions it holds), then one on the snapshots topic (the user's direct saves),
        all with the same id. A deployed agent's service account may forget only itself:
        naming another user raises `handlers.identity.Refused`."""
        user = whole_user_erasure(
            resolve_scope(user_id, self.principal, deployed_agent=self.deployed_agent)
        )
        request_id, now = self._new_id(), self._clock()

        def copy_for(partition: int | None) -> UserForgotten:
            return UserForgotten(
                event_id=request_id,
                occurred_at=now,
                user_id=user,
                requested_by=self.requested_by,
                reason=reason,
                turns_partition=partition,
            )

        for partition in range(self.settings.kafka.partitions):
            await self._producer.append(
                self._topics.turns, [copy_for(partition)], partition=partition
            )
        await self._producer.append(self._topics.snapshots, [copy_for(None)])
        return request_id

    async def erasures(self, user_id: str) -> list[ErasureReceipt]:
        """The user's erasure receipts, newest first, each with `complete` (every stage that
        must act on the request has left its step; `handlers.erasure_receipts`)."""
        found = await (await self._reads()).erasures(self._memory_user(user_id))
        partitions, types = self.settings.kafka.partitions, len(self.settings.memory.types)
        return [
            cast(ErasureReceipt, with_progress(receipt, partitions, types)) for receipt in found
        ]

    async def erasure(self, request_id: str) -> ErasureReceipt | None:
        """One request's receipt, with `complete` (`None`: no step has been projected yet, or
        the receipt is another user's than this client may read)."""
        found = await (await self._reads()).erasure(request_id)
        if found is None or "kind" not in found:  # a receipt an older projector began bare
            return None
        if not self._may_read(found["user_id"]):
            return None
        partitions, types = self.settings.kafka.partitions, len(self.settings.memory.types)
        return cast(ErasureReceipt, with_progress(found, partitions, types))

    async def wait_for_erasure(self, request_id: str, timeout: float = 60.0) -> ErasureReceipt:
        """The request's receipt once it is complete; `TimeoutError` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            receipt = await self.erasure(request_id)
            if receipt is not None and receipt["complete"]:
                return receipt
            if time.monotonic() >= deadline:
                seen = "no step yet" if receipt is None else f"steps {receipt['seen_steps']}"
                raise TimeoutError(
                    f"erasure {request_id} not complete after {timeout:.0f}s ({seen})"
                )
            await asyncio.sleep(POLL_SECONDS)
