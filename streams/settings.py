"""What the stream apps need to know, independent of how memstream reads its configuration."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from events.topics import Topics
from handlers.extraction.base import ExtractionLimits
from handlers.selection import EVERYTHING, Selection
from handlers.window import WindowPolicy
from streams.kafka_security import PLAINTEXT, KafkaSecurity

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The wall clock, the default `Clock`."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class StreamSettings:
    """Broker, topics and window settings shared by the stream apps."""

    bootstrap_servers: str
    topics: Topics
    partitions: int
    replication_factor: int
    group_prefix: str
    window: WindowPolicy
    idle_check_interval: timedelta
    session_timeout_seconds: float = 6.0
    heartbeat_interval_seconds: float = 1.0
    producer_max_batch_size: int | None = None
    """1 on Tansu, whose end offsets are wrong after multi-record batches (table recovery)."""
    producer_request_timeout_seconds: float | None = None
    """How long a send waits for the broker before it fails; None: Faust's default (1,200 s)."""
    llm_attempts: int = 3
    llm_max_in_flight: int = 16
    """LLM calls one memory type's worker keeps in flight at most (`llm.max_in_flight`)."""
    extraction_limits: ExtractionLimits = field(default_factory=ExtractionLimits)
    retention: Mapping[str, timedelta] = field(default_factory=dict)
    """How long a memory version of each type lives (a type not named: for ever)."""
    expiry_check_interval: timedelta = timedelta(seconds=60)
    """How often a memory type's stage looks for versions that are due to expire."""
    security: KafkaSecurity = PLAINTEXT
    """How every Kafka connection of the stage authenticates and encrypts."""
    drain_seconds: float = 20.0
    """At shutdown, how long a memory type's stage lets its records in flight finish."""
    selection: Selection = EVERYTHING
    """Which users' snapshots (and since when) the memory types' stages decide."""

    @property
    def records_in_flight(self) -> int:
        """Records a memory type's worker works on at once: twice its LLM calls, so that while
        some wait on the LLM others read the read model or embed."""
        return 2 * self.llm_max_in_flight

    def group(self, stage: str) -> str:
        """The consumer group (and Faust app id) of one stage."""
        return f"{self.group_prefix}{stage}"
