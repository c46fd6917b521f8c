"""One input record of a stage, however it was read: from the Faust stream or from the log.

Stages apply `InputRecord`s, not Faust events, so records the consumer skipped can be read back
from the log and applied through the same code (see `streams.progress`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from faust.types import TP, EventT

from handlers.dead_letters import Redrive, redrive_of


@dataclass(frozen=True)
class InputRecord:
    """A record's position in the log, its key and its raw value."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()

    @property
    def redrive(self) -> Redrive | None:
        """The operator's redrive this record is, if it is one (`handlers.dead_letters`)."""
        return redrive_of(self.headers)

    @property
    def tp(self) -> TP:
        return TP(self.topic, self.partition)

    @property
    def position(self) -> str:
        """`topic[partition]@offset`, for log lines."""
        return f"{self.topic}[{self.partition}]@{self.offset}"

    @classmethod
    def from_event(cls, event: EventT[bytes]) -> InputRecord:
        message = event.message
        value = event.value if isinstance(event.value, bytes) else None
        key = message.key if isinstance(message.key, bytes) else None
        return cls(
            message.topic, message.partition, message.offset, key, value, _headers(message.headers)
        )

    @classmethod
    def from_consumer_record(cls, record: Any) -> InputRecord:
        """From an `aiokafka.ConsumerRecord` read without deserializers."""
        return cls(
            record.topic,
            record.partition,
            record.offset,
            record.key,
            record.value,
            _headers(record.headers),
        )


def _headers(headers: Any) -> tuple[tuple[str, bytes], ...]:
    """Kafka headers as (name, value) pairs, from a list of pairs or a mapping."""
    if not headers:
        return ()
    pairs = headers.items() if hasattr(headers, "items") else headers
    return tuple(
        (str(name), bytes(value)) for name, value in pairs if isinstance(value, bytes | bytearray)
    )
