"""Many records in flight in one worker, one key's strictly in order (docs/architecture.md,
"Stages").

A memory type's stage spends most of a record waiting: on the LLM (a second for a hosted model,
a minute for a local one), the embedder, MongoDB. Applying one record at a time leaves a hosted
endpoint almost idle and makes a worker's throughput one user at a time. `KeyedTasks` runs each
record as a task of its own, at most `limit` at once, and starts a key's record only after the
key's previous record finished — the snapshots topic is keyed by user, so one user's snapshots,
saves and forget requests keep their log order while different users' overlap.

Why not Faust's `concurrency=N`: N agent instances share the stream without any key order, and
an agent with several instances may not write tables. Why not `asyncio.gather` over a batch: a
batch waits for its slowest record, and one user's records would still need ordering inside it.

Backpressure: `submit` waits while `limit * PENDING_PER_SLOT` records are submitted and not
finished (running, or waiting behind their key's earlier record), so the agent stops reading and
Faust stops fetching once a worker has enough work. A task that raises (the stages' `apply`
never does: it dead-letters what is not an outage) is re-raised by the next `submit` so the
agent crashes rather than skip it; its key's later tasks do not run. `cancel` stops the tasks of
revoked partitions at a rebalance: their records were not acknowledged, so they come again, to
this worker or another.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Hashable

log = logging.getLogger(__name__)

PENDING_PER_SLOT = 4
"""Submitted records allowed per running slot: enough that a slot freed by one user is taken at
once by another user's record, few enough that a rebalance cancels little finished work."""


class KeyedTasks:
    """At most `limit` records running at once; one key's records one after the other."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self._slots = asyncio.Semaphore(limit)
        self._tails: dict[Hashable, asyncio.Task[None]] = {}
        self._partitions: dict[asyncio.Task[None], int] = {}
        self._changed = asyncio.Event()
        self._failure: BaseException | None = None

    @property
    def pending(self) -> int:
        """Submitted and not finished."""
        return len(self._partitions)

    @property
    def partitions(self) -> set[int]:
        """The partitions of the tasks submitted and not finished."""
        return set(self._partitions.values())

    async def submit(
        self, key: Hashable, partition: int, work: Callable[[], Awaitable[None]]
    ) -> None:
        """Run `work` after the key's earlier work, once a slot is free; wait first while too
        many records are pending. Raises what an earlier task raised."""
        self._raise_failure()
        while self.pending >= self.limit * PENDING_PER_SLOT:
            self._changed.clear()
            await self._changed.wait()
            self._raise_failure()
        previous = self._tails.get(key)
        task = asyncio.create_task(self._run(previous, work))
        self._tails[key] = task
        self._partitions[task] = partition
        task.add_done_callback(lambda done: self._finished(key, done))

    async def cancel(self, partitions: Collection[int]) -> int:
        """Cancel the tasks of `partitions` and wait until they stopped; how many there were."""
        doomed = [task for task, partition in self._partitions.items() if partition in partitions]
        for task in doomed:
            task.cancel()
        if doomed:
            await asyncio.gather(*doomed, return_exceptions=True)
        return len(doomed)

    async def drain(self) -> None:
        """Wait until every submitted task finished."""
        while self._partitions:
            await asyncio.gather(*list(self._partitions), return_exceptions=True)
        self._raise_failure()

    async def _run(
        self, previous: asyncio.Task[None] | None, work: Callable[[], Awaitable[None]]
    ) -> None:
        if previous is not None:
            await asyncio.wait([previous])
            if previous.cancelled() or previous.exception() is not None:
                raise asyncio.CancelledError  # the key's earlier record did not finish
        async with self._slots:
            await work()

    def _finished(self, key: Hashable, task: asyncio.Task[None]) -> None:
        self._partitions.pop(task, None)
        if self._tails.get(key) is task:
            del self._tails[key]
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("a record's task failed: %r", error)
            if self._failure is None:
                self._failure = error
        self._changed.set()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure
