"""What a record on each topic must be, checked the same way by every stage that reads it.

A record that fails is *poison*: its own content is wrong, so no retry can help. The stage that
owns the topic's decisions dead-letters it with the reason (the window stage for the turns topic,
the extraction stages for the snapshots topic); every other reader passes over it, so a record
refused by one stage never shows up in another's results (a turn the window dead-lettered is
not projected into `turns` either).

Sealed content is opened with the reader's `keys` (`handlers.sealed_events`): a value that does
not open is poison; a value whose key was destroyed raises `KeyDestroyed` — the record is
forgotten, and the reader skips it.
"""

from __future__ import annotations

from events.codec import AnyEvent, EventDecodeError, decode
from events.consolidations import MemoriesConsolidated, MemoryConsolidationRequested
from events.forgetting import (
    MemoryExpired,
    MemoryForgotten,
    SessionForgotten,
    SessionsForgotten,
    UserForgotten,
)
from events.rollbacks import MemoryRollbackRequested, MemoryRolledBack
from events.saves import MemorySaved, MemorySaveRequested
from events.snapshots import SnapshotExtracted, SnapshotPromoted
from events.turns import SessionFlushRequested, SessionIdled, TurnRecorded
from handlers.identity import principal_problem
from handlers.sealed_events import KeyRing, opener
from handlers.sealing import SealBroken

TurnsTopicEvent = (
    TurnRecorded | SessionFlushRequested | SessionIdled | SessionForgotten | UserForgotten
)
SnapshotsTopicEvent = (
    SnapshotPromoted
    | MemorySaveRequested
    | MemoryRollbackRequested
    | MemoryConsolidationRequested
    | MemoryForgotten
    | UserForgotten
    | SessionsForgotten
    | MemoryExpired
)
ResultRecord = SnapshotExtracted | MemorySaved | MemoryRolledBack | MemoriesConsolidated


class InvalidRecord(ValueError):
    """A record that is not what its topic carries; the message says why."""


def read_turns_record(
    key: bytes | None, value: bytes | None, keys: KeyRing | None = None
) -> TurnsTopicEvent:
    """A turns-topic record as its event: a turn or a session command, keyed by its session (a
    user's forget request: by the user, one copy per partition, naming its partition)."""
    event = _decoded(value, keys)
    if not isinstance(event, TurnsTopicEvent):
        raise InvalidRecord(f"{event.event_type} does not belong on the turns topic")
    _check_key(key, event.key)
    if isinstance(event, UserForgotten) and event.turns_partition is None:
        raise InvalidRecord("a UserForgotten on the turns topic names its turns_partition")
    if isinstance(event, TurnRecorded):
        _check_principal(event.user_id, event)
    return event


def read_snapshots_record(
    key: bytes | None, value: bytes | None, keys: KeyRing | None = None
) -> SnapshotsTopicEvent:
    """A snapshots-topic record as its event (a snapshot, a direct save, a rollback, a
    consolidation), keyed by
    its user."""
    event = _decoded(value, keys)
    if not isinstance(event, SnapshotsTopicEvent):
        raise InvalidRecord(f"{event.event_type} does not belong on the snapshots topic")
    _check_key(key, event.key)
    if isinstance(event, UserForgotten) and event.turns_partition is not None:
        raise InvalidRecord("a UserForgotten on the snapshots topic has no turns_partition")
    if isinstance(
        event, MemorySaveRequested | MemoryRollbackRequested | MemoryConsolidationRequested
    ):
        _check_principal(event.user_id, event)
    return event


def read_result_record(
    key: bytes | None, value: bytes | None, keys: KeyRing | None = None
) -> ResultRecord | None:
    """A memories-topic record as a result record; None for the topic's other events."""
    event = _decoded(value, keys)
    if not isinstance(event, ResultRecord):
        return None
    _check_key(key, event.key)
    return event


def _decoded(value: bytes | None, keys: KeyRing | None) -> AnyEvent:
    if value is None:
        raise InvalidRecord("the record has no value")
    try:
        return decode(value, opener(keys))
    except (EventDecodeError, SealBroken) as exc:
        raise InvalidRecord(str(exc)) from exc


def _check_key(key: bytes | None, expected: str) -> None:
    if key != expected.encode():
        raise InvalidRecord(f"record key {key!r} is not {expected!r}")


def _check_principal(
    user_id: str,
    event: TurnRecorded
    | MemorySaveRequested
    | MemoryRollbackRequested
    | MemoryConsolidationRequested,
) -> None:
    # The principal recorded on the event is the only identity the pipeline trusts
    # (docs/architecture.md, "Identity").
    if problem := principal_problem(user_id, event.principal):
        raise InvalidRecord(problem)
