"""The one codec: events to orjson bytes and back, with schema upcasting on the way in
(`events.upcasting`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import orjson
from pydantic import Field, TypeAdapter, ValidationError

from events.consolidations import MemoriesConsolidated, MemoryConsolidationRequested
from events.dead_letters import DeadLetterRedriven, InputDeadLettered
from events.forgetting import (
    MemoriesForgotten,
    MemoryExpired,
    MemoryForgotten,
    SessionForgotten,
    SessionsForgotten,
    UserForgotten,
)
from events.memories import MemoryAdded, MemoryReinforced, MemoryUpdated
from events.rollbacks import MemoryRollbackRequested, MemoryRolledBack
from events.saves import MemorySaved, MemorySaveRequested
from events.serving import ReadModelSwitched
from events.snapshots import SnapshotExtracted, SnapshotPromoted
from events.turns import SessionFlushRequested, SessionIdled, TurnRecorded
from events.upcasting import upcast

AnyEvent = Annotated[
    TurnRecorded
    | SessionFlushRequested
    | SessionIdled
    | SnapshotPromoted
    | SnapshotExtracted
    | MemoryAdded
    | MemoryUpdated
    | MemoryReinforced
    | MemorySaveRequested
    | MemorySaved
    | MemoryRollbackRequested
    | MemoryRolledBack
    | MemoryConsolidationRequested
    | MemoriesConsolidated
    | InputDeadLettered
    | DeadLetterRedriven
    | MemoryForgotten
    | SessionForgotten
    | UserForgotten
    | SessionsForgotten
    | MemoriesForgotten
    | MemoryExpired
    | ReadModelSwitched,
    Field(discriminator="event_type"),
]
EVENT_TYPES: tuple[type[Any], ...] = (
    TurnRecorded,
    SessionFlushRequested,
    SessionIdled,
    SnapshotPromoted,
    SnapshotExtracted,
    MemoryAdded,
    MemoryUpdated,
    MemoryReinforced,
    MemorySaveRequested,
    MemorySaved,
    MemoryRollbackRequested,
    MemoryRolledBack,
    MemoryConsolidationRequested,
    MemoriesConsolidated,
    InputDeadLettered,
    DeadLetterRedriven,
    MemoryForgotten,
    SessionForgotten,
    UserForgotten,
    SessionsForgotten,
    MemoriesForgotten,
    MemoryExpired,
    ReadModelSwitched,
)
_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(AnyEvent)

MAX_EVENT_BYTES = 1_000_000
"""The largest record the pipeline reads or writes: below the broker's default message limit
(1 MiB), so nothing it accepts can be refused by the broker."""


class EventDecodeError(ValueError):
    """A record is not a valid memstream event; the message says why."""


class EventTooLarge(ValueError):
    """An event encodes to more than `MAX_EVENT_BYTES`; the message says how large it is."""


PayloadTransform = Callable[[dict[str, Any]], dict[str, Any]]
"""A rewrite of an event's JSON object on its way to or from the wire: sealing its content
fields, or opening them (`handlers.sealed_events`; events import no cryptography)."""


def encode(event: AnyEvent, seal: PayloadTransform | None = None) -> bytes:
    """Serialise an event to compact JSON bytes (`EventTooLarge` beyond `MAX_EVENT_BYTES`),
    its content sealed by `seal` when given."""
    payload = event.model_dump(mode="json")
    data = orjson.dumps(seal(payload) if seal is not None else payload)
    if len(data) > MAX_EVENT_BYTES:
        raise EventTooLarge(
            f"{event.event_type} {event.event_id} is {len(data)} bytes, more than {MAX_EVENT_BYTES}"
        )
    return data


def decode(data: bytes | str, open_content: PayloadTransform | None = None) -> AnyEvent:
    """Parse and validate JSON bytes (or text) into the event they describe, upcasting old
    versions, its sealed content opened by `open_content` when given. Anything that is not a
    valid event raises `EventDecodeError`; `open_content`'s own errors pass through."""
    if isinstance(data, str):
        try:
            data = data.encode()
        except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 record can hold it
            raise EventDecodeError(f"not UTF-8 text: {exc}") from exc
    size = len(data)
    if size > MAX_EVENT_BYTES:
        raise EventDecodeError(f"event is {size} bytes, more than {MAX_EVENT_BYTES}")
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise EventDecodeError(f"not JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise EventDecodeError(f"an event is a JSON object, got {type(payload).__name__}")
    if open_content is not None:
        payload = open_content(payload)
    return decode_payload(payload)


def decode_payload(payload: dict[str, Any]) -> AnyEvent:
    """Validate an already-parsed JSON object as an event."""
    try:
        return _ADAPTER.validate_python(upcast(payload))
    except ValidationError as exc:
        raise EventDecodeError(_describe(exc)) from exc


def _describe(exc: ValidationError) -> str:
    problems = [
        f"{'.'.join(str(part) for part in error['loc']) or '<event>'}: {error['msg']}"
        for error in exc.errors()[:5]
    ]
    more = exc.error_count() - len(problems)
    return "invalid event: " + "; ".join(problems) + (f" (+{more} more)" if more > 0 else "")
