"""Quotas: how much one API key may ask of the HTTP API and one user may cost the LLM
(docs/operations.md, "Quotas"). Pure rules; the counting lives in `memstream.api.keys` (requests)
and
`projections.llm_budget` (tokens).

* **Request rate** — a key may make `limit` requests per fixed window of `period`; the window
  is named by its start, so every server process counts in the same one (in MongoDB). A fixed
  window lets a key burst up to twice its limit across a window boundary; in exchange it costs
  one counter per key and window, no per-request history.
* **LLM token budget** — a user's extraction may spend `budget` tokens per UTC day. A snapshot
  of a user over budget is not dropped and not decided differently: it waits in the log until
  the next day, so the memories it yields are the ones it would have yielded (the wall clock
  only delays the decision, as it only triggers idle promotions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True)
class RateWindow:
    """The window a request falls in: its name, and the seconds until the next one starts."""

    name: str
    seconds_left: float


def rate_window(now: datetime, period: timedelta) -> RateWindow:
    """The fixed window of `period` that `now` falls in (windows start at the Unix epoch)."""
    length = period.total_seconds()
    if length <= 0:
        raise ValueError("a rate window must last more than 0 seconds")
    elapsed = now.timestamp()
    start = math.floor(elapsed / length) * length
    return RateWindow(str(int(start)), max(start + length - elapsed, 0.0))


def retry_after(window: RateWindow) -> int:
    """The whole seconds a refused caller should wait (`Retry-After`), at least 1."""
    return max(1, math.ceil(window.seconds_left))


def over_rate(count: int, limit: int | None) -> bool:
    """Whether the `count`-th request of a window is over a key's `limit` (None: no limit)."""
    return limit is not None and count > limit


def budget_day(now: datetime) -> str:
    """The UTC day a token budget counts in (`2026-12-03`)."""
    return now.astimezone(UTC).date().isoformat()


def next_budget_day(now: datetime) -> datetime:
    """When the next UTC day, and with it a fresh budget, starts."""
    day = now.astimezone(UTC).date() + timedelta(days=1)
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def over_budget(spent: int, budget: int | None) -> bool:
    """Whether a user who spent `spent` tokens today may not start another extraction."""
    return budget is not None and spent >= budget
