"""How many LLM tokens each user's extraction spent per UTC day (`llm_budget`), for the daily
budget (`handlers.quotas`, docs/operations.md, "Quotas").

One document per user and day, `{_id: "<user>|<day>", user_id, day, tokens, expires}`,
incremented after each extraction by every memory type's workers (`$inc`, so concurrent
workers add up) and removed by a TTL index two days after its day. Like the data keys, this is
operational state, not a read model: it is not derived from the log and `replay` does not
rebuild it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pymongo import ASCENDING, IndexModel
from pymongo.database import Database

from handlers.quotas import budget_day, next_budget_day

LLM_BUDGET = "llm_budget"
Document = dict[str, Any]


class LlmBudgetStore:
    """The `llm_budget` collection of `db` (synchronous pymongo; call it in a thread)."""

    def __init__(self, db: Database[Document]) -> None:
        self._spent = db[LLM_BUDGET]
        self._indexed = False

    def _index(self) -> None:
        if not self._indexed:
            self._spent.create_indexes(
                [
                    IndexModel([("expires", ASCENDING)], expireAfterSeconds=0),
                    IndexModel([("day", ASCENDING), ("tokens", ASCENDING)]),
                ]
            )
            self._indexed = True

    def spent(self, user_id: str, now: datetime) -> int:
        """The tokens `user_id`'s extraction spent on `now`'s UTC day."""
        found = self._spent.find_one({"_id": f"{user_id}|{budget_day(now)}"}, {"tokens": 1})
        return int(found["tokens"]) if found else 0

    def spend(self, user_id: str, tokens: int, now: datetime) -> None:
        """Add `tokens` to `user_id`'s day."""
        if tokens <= 0:
            return
        self._index()
        day = budget_day(now)
        self._spent.update_one(
            {"_id": f"{user_id}|{day}"},
            {
                "$inc": {"tokens": tokens},
                "$setOnInsert": {
                    "user_id": user_id,
                    "day": day,
                    "expires": next_budget_day(now) + timedelta(days=1),
                },
            },
            upsert=True,
        )

    def over_budget(self, budget: int, now: datetime) -> list[str]:
        """The users whose extraction spent at least `budget` tokens on `now`'s day."""
        found = self._spent.find(
            {"day": budget_day(now), "tokens": {"$gte": budget}}, {"user_id": 1}
        )
        return sorted(str(document["user_id"]) for document in found)
