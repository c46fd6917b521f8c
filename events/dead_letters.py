"""Dead letters: input the pipeline could not use, kept with the reason instead of dropped, and
the operator's redrives of them (docs/architecture.md, "Dead letters")."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from events.base import Event, UtcDatetime


class InputDeadLettered(Event):
    """A record (a malformed event, invalid LLM output …) was set aside with the reason.

    Travels on the dead-letters topic keyed by the poison record's key; every field is described
    in docs/architecture.md, "Dead letters". `payload` is the record's value as UTF-8 text (cut
    at 64,000 characters); `payload_sha256` and `payload_bytes` describe the original bytes, so
    a redrive can tell whether `payload` is the whole record. `redrive_id` and `redrive_of` are
    set when the record was a redrive of an earlier dead letter and failed again.
    """

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
    payload_bytes: int | None = Field(default=None, ge=0)
    payload_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    redrive_id: str | None = Field(default=None, min_length=1, max_length=200)
    redrive_of: str | None = Field(default=None, min_length=1, max_length=200)


class DeadLetterRedriven(Event):
    """An operator re-sent a dead letter's record to its source topic (`memstream dlq redrive`).

    `event_id` is the redrive id (`handlers.dead_letters.redrive_id`: the dead letter's id and
    how many redrives it had before), also carried by the re-sent record's headers. Travels on
    the dead-letters topic keyed by the dead letter's id. The dead-letter API is an operator API
    that spans users: this event names no user.
    """

    event_type: Literal["DeadLetterRedriven"] = "DeadLetterRedriven"
    schema_version: Literal[1] = 1

    dead_letter_id: str = Field(min_length=1, max_length=200)
    stage: str = Field(min_length=1, max_length=100)
    target_topic: str = Field(min_length=1, max_length=300)
    target_partition: int = Field(ge=0)
    target_offset: int | None = Field(default=None, ge=0)
    forced: bool = False

    @property
    def key(self) -> str:
        return self.dead_letter_id
