"""The daily LLM token budget of each user, applied by the memory types' stages (docs/operations.md,
"Quotas"; the rule is `handlers.quotas.over_budget`).

Before a snapshot's extraction, `BudgetGate.wait_within` holds it while its user's extraction
spent the day's budget: the snapshot waits in the log (it is not acknowledged, so it is never
dropped) and is extracted as it would have been once the next UTC day starts. Only that user's
records wait; other users' go on, but a waiting record keeps one of the worker's slots for
records in flight (`streams.concurrency`), so as many users over budget at once as a worker
has slots stop it until the day turns. After the extraction, `spend` adds what it cost.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from functools import partial

from events.memories import LLMUsage
from handlers.quotas import next_budget_day, over_budget
from projections.llm_budget import LlmBudgetStore
from streams import metrics
from streams.retrying import through_outages
from streams.settings import Clock

log = logging.getLogger(__name__)


class BudgetGate:
    """One memory type's view of the users' daily budget."""

    def __init__(
        self,
        store: LlmBudgetStore,
        budget: int,
        *,
        memory_type: str,
        clock: Clock,
        check_every: timedelta = timedelta(seconds=60),
    ) -> None:
        self.store = store
        self.budget = budget
        self.memory_type = memory_type
        self.clock = clock
        self.check_every = check_every

    async def _spent(self, user_id: str) -> int:
        read = partial(asyncio.to_thread, self.store.spent, user_id, self.clock())
        return await through_outages(read, f"reading {user_id}'s LLM budget")

    async def wait_within(self, user_id: str, what: str) -> None:
        """Return once `user_id` has budget left today (at once, mostly)."""
        if not over_budget(await self._spent(user_id), self.budget):
            return
        waiting = metrics.LLM_BUDGET_WAITING.labels(self.memory_type)
        metrics.LLM_BUDGET_EXCEEDED.labels(self.memory_type).inc()
        waiting.inc()
        log.warning(
            "%s waits: %s spent its %d LLM tokens of today (the next day starts %s)",
            what, user_id, self.budget, next_budget_day(self.clock()).isoformat(),
        )  # fmt: skip
        try:
            while over_budget(await self._spent(user_id), self.budget):
                until_next_day = (next_budget_day(self.clock()) - self.clock()).total_seconds()
                await asyncio.sleep(max(0.1, min(until_next_day, self.check_every.total_seconds())))
        finally:
            waiting.dec()
        log.info("%s goes on: %s has LLM budget again", what, user_id)

    async def spend(self, user_id: str, usage: LLMUsage) -> None:
        tokens = usage.prompt_tokens + usage.completion_tokens
        add = partial(asyncio.to_thread, self.store.spend, user_id, tokens, self.clock())
        await through_outages(add, f"counting {user_id}'s LLM tokens")
