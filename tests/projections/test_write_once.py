"""Fingerprints: the bytes hashed are orjson's of the content with times cut to milliseconds."""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, date, datetime, time, timedelta, timezone
from typing import Any

import orjson

from events.base import at_stored_precision
from projections.write_once import fingerprint_of
from tests import factories as f


def walked_fingerprint(content: Any) -> str:
    """The fingerprint as first defined: every value walked, times cut, then orjson."""
    data = orjson.dumps(
        at_stored_precision(content), option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
    )
    return hashlib.sha256(data).hexdigest()[:32]


def random_content(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(10 if depth < 3 else 6)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    if kind == 0:
        return rng.random()
    if kind == 1:
        return rng.choice((0, -7, 10**12, True, None, "", "é", "t|1"))
    if kind == 2:  # whole milliseconds, or not, or none at all
        return start + timedelta(microseconds=rng.randrange(10**12) * rng.choice((0, 1, 1000)))
    if kind == 3:
        offset = timezone(timedelta(hours=rng.randrange(-12, 13)))
        return datetime(2026, 5, 1, 3, 4, 5, rng.randrange(10**6), tzinfo=offset)
    if kind == 4:
        return rng.choice((date(2026, 1, 2), time(3, 4, 5, 678901), datetime(2026, 1, 1, 1, 1)))
    if kind == 5:
        return (start + timedelta(days=rng.randrange(100))).replace(microsecond=999999)
    if kind in (6, 7):
        keys = ("a", "b", "z", "ä", 1, 2)
        return {rng.choice(keys): random_content(rng, depth + 1) for _ in range(rng.randrange(4))}
    if kind == 8:
        return [random_content(rng, depth + 1) for _ in range(rng.randrange(4))]
    return tuple(random_content(rng, depth + 1) for _ in range(rng.randrange(3)))


def test_a_fingerprint_is_the_one_of_the_walked_content_for_any_content() -> None:
    rng = random.Random(7)
    for _ in range(5_000):
        content = random_content(rng)
        assert fingerprint_of(content) == walked_fingerprint(content), content


def test_a_fingerprint_of_an_event_is_the_one_stored_read_models_hold() -> None:
    result = f.extracted(f.snapshot(), f.content(), f.content(text="The user likes tea."))
    for event in (result, *result.decisions, f.turn(occurred_at=f.at(0.123456))):
        dumped = event.model_dump()
        assert fingerprint_of(dumped) == walked_fingerprint(dumped)
