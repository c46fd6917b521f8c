"""Dead letters: input the pipeline could not use, kept with the reason instead of dropped."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from events.base import Event, UtcDatetime


class InputDeadLettered(Event):
    """A record (a malformed event, invalid LLM output …) was set aside with the reason."""

    event_type: Literal["InputDeadLettered"] = "InputDeadLettered"
    schema_version: Literal[1] = 1

    stage: str = Field(min_length=1, max_length=100)
    reason: str = Field(min_length=1, max_length=4_000)
    source_topic: str | None = None
    source_partition: int | None = None
    source_offset: int | None = None
    record_key: str | None = None
    payload: str = Field(default="", max_length=64_000)
    dead_lettered_at: UtcDatetime
