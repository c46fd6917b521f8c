"""The event envelope every memstream event shares.

Events are immutable facts named in the past tense. Each carries `event_id` (unique; projections are
idempotent by it), `event_type` (the discriminator stored in the JSON; each subclass pins it with a
`Literal` default), `schema_version` (bumped on incompatible changes, with an upcaster in
`events.codec`), and `occurred_at` (UTC event time).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


def _require_utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("timestamps must carry a timezone (UTC), e.g. 2026-01-31T12:00:00Z")
    return value.astimezone(UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_require_utc)]
"""A timezone-aware timestamp, normalised to UTC. Naive timestamps are refused."""

Identifier = Annotated[
    str,
    Field(min_length=1, max_length=200, pattern=r"^[^\s|\x00-\x1f]+$"),
]
"""User, session and agent ids: no whitespace, control characters or `|` (the key separator)."""

EventId = Annotated[str, Field(min_length=1, max_length=200)]


class Event(BaseModel):
    """Base of all events: frozen and strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: EventId
    event_type: str
    schema_version: int
    occurred_at: UtcDatetime


def at_stored_precision(value: Any) -> Any:
    """`value` (a `model_dump()` in python mode) with every datetime cut to milliseconds, the
    precision MongoDB keeps: a fingerprint of what a read model can hold, so an event rebuilt
    from the read model fingerprints like the original."""
    if isinstance(value, datetime):
        return value.replace(microsecond=value.microsecond // 1000 * 1000)
    if isinstance(value, dict):
        return {key: at_stored_precision(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [at_stored_precision(item) for item in value]
    return value
