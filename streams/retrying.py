"""The one retry policy of every stage: outages are waited out, poison is dead-lettered.

`handlers.failures.is_outage` decides which failures are outages. Those are retried here with
exponential back-off and jitter (0.5 s doubling to 30 s) for as long as they last — a stage
never advances past a record because the broker, the database, the LLM or the embedder was
down. The policy is tenacity's (`AsyncRetrying`), not a hand-written loop.

Stages retry the *step* that failed (sending a snapshot, asking the LLM, writing a view), so an
outage after the LLM answered does not ask it again; `apply_or_dead_letter` wraps a whole
record as the last line: an outage anywhere else retries the record, anything else is poison.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import faust
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_never,
    wait_exponential_jitter,
)

from handlers.failures import is_outage
from streams.dead_letters import dead_letter
from streams.metrics import OUTAGE_RETRIES
from streams.records import InputRecord
from streams.settings import Clock

log = logging.getLogger(__name__)
T = TypeVar("T")

INITIAL_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 30.0


def _outage(exc: BaseException) -> bool:
    return is_outage(exc)


def _log_outage(what: str) -> Callable[[RetryCallState], None]:
    def before_sleep(state: RetryCallState) -> None:
        failure = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        OUTAGE_RETRIES.labels(type(failure).__name__).inc()
        log.warning(
            "%s: %r (attempt %d); waiting %.1fs for it to come back",
            what,
            failure,
            state.attempt_number,
            delay,
        )

    return before_sleep


MAX_RETRY_AFTER_SECONDS = 300.0
"""The longest a provider's `Retry-After` is honoured (a longer one is a broken header)."""


class _BackoffOrRetryAfter:
    """Exponential back-off with jitter, but never sooner than the `Retry-After` the failure
    carries (`ProviderUnavailable.retry_after`: an LLM or embeddings endpoint rate-limiting
    us with HTTP 429): retrying earlier would only be refused again."""

    def __init__(self) -> None:
        self._backoff = wait_exponential_jitter(
            multiplier=INITIAL_BACKOFF_SECONDS, max=MAX_BACKOFF_SECONDS
        )

    def __call__(self, state: RetryCallState) -> float:
        delay = float(self._backoff(state))
        failure = state.outcome.exception() if state.outcome else None
        retry_after = getattr(failure, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after > 0:
            return max(delay, min(float(retry_after), MAX_RETRY_AFTER_SECONDS))
        return delay


def _first_delay(failure: BaseException) -> float:
    """The wait before the second attempt: the back-off's first step, or the failure's
    `Retry-After` if longer (at most `MAX_RETRY_AFTER_SECONDS`)."""
    retry_after = getattr(failure, "retry_after", None)
    if isinstance(retry_after, int | float) and retry_after > 0:
        return max(INITIAL_BACKOFF_SECONDS, min(float(retry_after), MAX_RETRY_AFTER_SECONDS))
    return INITIAL_BACKOFF_SECONDS


def outage_policy(what: str) -> AsyncRetrying:
    """Retry while the failure is an outage, forever, with back-off (at least what a provider
    asked for with `Retry-After`); raise anything else."""
    return AsyncRetrying(
        retry=retry_if_exception(_outage),
        wait=_BackoffOrRetryAfter(),
        stop=stop_never,
        before_sleep=_log_outage(what),
        reraise=True,
    )


async def through_outages(call: Callable[[], Awaitable[T]], what: str) -> T:
    """`await call()`, retried through outages (see `outage_policy`).

    The first attempt runs outside tenacity: a stage calls this for every record and every
    step, almost always once, and building the retry machinery each time cost the window a
    quarter of its CPU per turn. Only a first attempt that met an outage enters the policy."""
    try:
        return await call()
    except Exception as exc:
        if not is_outage(exc):
            raise
        delay = _first_delay(exc)
        OUTAGE_RETRIES.labels(type(exc).__name__).inc()
        log.warning("%s: %r; waiting %.1fs for it to come back", what, exc, delay)
        await asyncio.sleep(delay)

    async def attempt() -> T:  # a coroutine function: tenacity would not await a plain callable
        return await call()

    result: T = await outage_policy(what)(attempt)
    return result


def apply_or_dead_letter(
    apply: Callable[[InputRecord], Awaitable[None]],
    dead_letters: faust.TopicT,
    *,
    stage: str,
    clock: Clock,
) -> Callable[[InputRecord], Awaitable[None]]:
    """`apply`, retried whole through outages; a record it fails on otherwise is poison and is
    dead-lettered with the reason, so one bad record never stops the stream."""

    async def applied(record: InputRecord) -> None:
        try:
            await through_outages(lambda: apply(record), f"{stage} at {record.position}")
        except Exception as exc:
            log.exception("%s failed on %s; dead-lettering it", stage, record.position)
            reason = f"{stage} failed: {exc!r}"
            await through_outages(
                lambda: dead_letter(dead_letters, record, stage=stage, reason=reason, clock=clock),
                f"{stage} dead-lettering {record.position}",
            )

    return applied
