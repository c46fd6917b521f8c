"""The one retry policy: outages are waited out, poison is dead-lettered, progress never skips."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError
from pymongo.errors import AutoReconnect

import streams.retrying as retrying
from events import EventDecodeError, decode
from handlers.ports import LLMUnavailable
from streams.records import InputRecord
from tests.factories import CLOCK

RECORD = InputRecord("t.turns", 1, 7, b"u1|s1", b"{}")


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retrying, "INITIAL_BACKOFF_SECONDS", 0.001)
    monkeypatch.setattr(retrying, "MAX_BACKOFF_SECONDS", 0.002)
    monkeypatch.setattr(retrying, "wait_exponential_jitter", _no_jitter)


def _no_jitter(multiplier: float, max: float) -> Any:
    from tenacity import wait_fixed

    return wait_fixed(0)


def failing(*failures: BaseException) -> Any:
    """An async step that raises `failures` in turn, then returns 'done'."""
    pending = list(failures)
    calls: list[int] = []

    async def step() -> str:
        calls.append(1)
        if pending:
            raise pending.pop(0)
        return "done"

    step.calls = calls  # type: ignore[attr-defined]
    return step


def test_an_outage_is_retried_until_it_is_over() -> None:
    outages = [KafkaConnectionError(), AutoReconnect("down"), LLMUnavailable("503")] * 4
    step = failing(*outages)
    assert asyncio.run(retrying.through_outages(step, "test")) == "done"
    assert len(step.calls) == 13


def test_poison_is_raised_at_once() -> None:
    step = failing(EventDecodeError("not JSON"))
    with pytest.raises(EventDecodeError):
        asyncio.run(retrying.through_outages(step, "test"))
    assert len(step.calls) == 1


@dataclass
class Topic:
    """A Faust topic's `send` (returning the ack future), recording what was sent."""

    sent: list[bytes] = field(default_factory=list)

    async def send(self, *, key: bytes | None, value: bytes, force: bool) -> Any:
        self.sent.append(value)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


def test_a_record_failing_with_an_outage_is_applied_again_not_dead_lettered() -> None:
    step = failing(KafkaConnectionError(), KafkaConnectionError())
    dead_letters = Topic()

    async def apply(record: InputRecord) -> None:
        await step()

    applied = retrying.apply_or_dead_letter(
        apply, dead_letters, stage="window", clock=lambda: CLOCK
    )  # type: ignore[arg-type]
    asyncio.run(applied(RECORD))
    assert len(step.calls) == 3
    assert dead_letters.sent == []


def test_a_record_failing_otherwise_is_dead_lettered_with_the_reason() -> None:
    dead_letters = Topic()

    async def apply(record: InputRecord) -> None:
        raise ValueError("no such field")

    applied = retrying.apply_or_dead_letter(
        apply, dead_letters, stage="window", clock=lambda: CLOCK
    )  # type: ignore[arg-type]
    asyncio.run(applied(RECORD))
    (sent,) = dead_letters.sent
    letter = decode(sent)
    assert letter.event_type == "InputDeadLettered"
    assert letter.reason == "window failed: ValueError('no such field')"  # type: ignore[union-attr]
    assert (letter.source_topic, letter.source_offset) == ("t.turns", 7)  # type: ignore[union-attr]


def test_a_rate_limited_call_waits_at_least_its_retry_after() -> None:
    """HTTP 429 with `Retry-After: 0.3`: waited out (never dead-lettered), not sooner."""
    import time

    step = failing(LLMUnavailable("RateLimitError: 429", retry_after=0.3))
    started = time.monotonic()
    assert asyncio.run(retrying.through_outages(step, "test")) == "done"
    assert time.monotonic() - started >= 0.3
    assert len(step.calls) == 2


def test_an_absurd_retry_after_is_capped() -> None:
    from tenacity import RetryCallState

    policy = retrying._BackoffOrRetryAfter()
    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
    state.set_exception((LLMUnavailable, LLMUnavailable("429", retry_after=1e9), None))
    assert policy(state) == retrying.MAX_RETRY_AFTER_SECONDS
