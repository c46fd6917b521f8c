"""How fast one pipeline stage drains a backlog: its consumer group's lag, sampled over time.

A stage's lag is what its consumer group has yet to commit on its input topics: the sum over
their partitions of the end offset minus the committed offset. `bench.profile_stages` starts the
stages one after the other on a backlog their upstream stages left complete, samples each one's
lag until it is zero, and reports how many input records it applied per second.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.types import TP


def lag_of(ends: Mapping[TP, int], committed: Mapping[TP, int | None]) -> int:
    """Records the group has yet to commit: end minus committed offset, summed over partitions
    (a partition without a commit counts from offset 0)."""
    return sum(max(0, end - (committed.get(tp) or 0)) for tp, end in ends.items())


@dataclass(frozen=True)
class Sample:
    seconds: float
    """Since the stage's worker was started."""
    lag: int
    end: int
    """Records in its input topics."""


@dataclass
class Drain:
    """A stage's drain of its backlog."""

    stage: str
    records: int
    """Input records at the end (the backlog, plus anything the stage wrote to its own input)."""
    ready_seconds: float
    """From starting the worker to its first partition assignment (imports, group join)."""
    drained_seconds: float
    """From starting the worker to a lag of zero."""
    samples: list[Sample] = field(default_factory=list)

    @property
    def drain_seconds(self) -> float:
        """From the worker being ready to a lag of zero: the time spent applying records."""
        return max(self.drained_seconds - self.ready_seconds, 1e-9)

    @property
    def records_per_second(self) -> float:
        return self.records / self.drain_seconds

    def to_json(self, max_samples: int = 60) -> dict[str, Any]:
        step = max(1, len(self.samples) // max_samples)
        kept = self.samples[::step]
        if self.samples and kept[-1] is not self.samples[-1]:
            kept.append(self.samples[-1])
        return {
            "stage": self.stage,
            "records": self.records,
            "ready_seconds": round(self.ready_seconds, 2),
            "drain_seconds": round(self.drain_seconds, 2),
            "records_per_second": round(self.records_per_second, 1),
            "lag": [[round(s.seconds, 1), s.lag] for s in kept],
        }


def drained(samples: Sequence[Sample], *, quiet: int = 2) -> bool:
    """The last `quiet` samples show no lag over a non-empty input."""
    if len(samples) < quiet:
        return False
    return all(s.lag == 0 and s.end > 0 for s in samples[-quiet:])


class LagProbe:
    """Samples one consumer group's lag on a set of topics (its own consumers: no group joined,
    nothing committed)."""

    def __init__(
        self, bootstrap_servers: str, group: str, topics: Collection[str], partitions: int
    ) -> None:
        self._tps = [TopicPartition(topic, p) for topic in topics for p in range(partitions)]
        # Carries the group id but never subscribes: it never joins the group (as
        # `streams.log_reader.CommittedOffsets` reads commits; Tansu lacks the admin API).
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap_servers, group_id=group, enable_auto_commit=False
        )

    async def __aenter__(self) -> LagProbe:
        await self._consumer.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._consumer.stop()

    async def sample(self) -> tuple[int, int]:
        """(lag, end): records not yet committed, records in the topics."""
        found = await self._consumer.end_offsets(self._tps)
        ends = {TP(tp.topic, tp.partition): offset for tp, offset in found.items()}
        committed = {
            TP(tp.topic, tp.partition): await self._consumer.committed(tp) for tp in self._tps
        }
        return lag_of(ends, committed), sum(ends.values())


async def measure_drain(
    stage: str,
    probe: LagProbe,
    *,
    started: float,
    is_ready: Callable[[], bool],
    alive: Callable[[], bool],
    interval: float = 0.25,
    timeout: float = 900.0,
) -> Drain:
    """Sample `probe` until the stage (started at `started`, `time.monotonic()`) has no lag.

    Raises `RuntimeError` when the worker dies or the lag does not reach zero in `timeout`.
    """
    ready_at: float | None = None
    samples: list[Sample] = []
    while True:
        now = time.monotonic()
        if ready_at is None and is_ready():
            ready_at = now - started
        lag, end = await probe.sample()
        samples.append(Sample(now - started, lag, end))
        if ready_at is not None and drained(samples):
            # the first zero-lag sample of the quiet run is when it drained
            return Drain(stage, end, ready_at, samples[-2].seconds, samples)
        if not alive():
            raise RuntimeError(f"the {stage} worker exited while draining")
        if now - started > timeout:
            raise RuntimeError(f"{stage} still lags {lag} records after {timeout:.0f}s")
        await asyncio.sleep(interval)
