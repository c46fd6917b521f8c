"""Quota rules: fixed rate windows, Retry-After, the token budget's day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from handlers.quotas import (
    budget_day,
    next_budget_day,
    over_budget,
    over_rate,
    rate_window,
    retry_after,
)


def test_requests_in_one_minute_share_a_window_and_wait_for_the_next() -> None:
    minute = timedelta(minutes=1)
    first = rate_window(datetime(2026, 12, 3, 9, 0, 5, tzinfo=UTC), minute)
    second = rate_window(datetime(2026, 12, 3, 9, 0, 59, 500_000, tzinfo=UTC), minute)
    third = rate_window(datetime(2026, 12, 3, 9, 1, 0, tzinfo=UTC), minute)
    assert first.name == second.name != third.name
    assert first.seconds_left == pytest.approx(55)
    assert retry_after(second) == 1 and retry_after(first) == 55


def test_the_limit_th_request_passes_and_the_next_is_over() -> None:
    assert not over_rate(10, 10) and over_rate(11, 10)
    assert not over_rate(10**6, None)


def test_a_budget_counts_per_utc_day() -> None:
    late = datetime(2026, 12, 3, 23, 30, tzinfo=UTC)
    assert budget_day(late) == "2026-12-03"
    assert budget_day(late + timedelta(hours=1)) == "2026-12-04"
    assert next_budget_day(late) == datetime(2026, 12, 4, tzinfo=UTC)
    assert over_budget(1_000, 1_000) and not over_budget(999, 1_000)
    assert not over_budget(10**9, None)


def test_a_window_must_last() -> None:
    with pytest.raises(ValueError):
        rate_window(datetime(2026, 12, 3, tzinfo=UTC), timedelta(0))
