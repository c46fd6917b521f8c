"""Immutable event models, the codec and topic names. Imports neither faust nor pymongo."""

from events.codec import AnyEvent, EventDecodeError, decode, encode
from events.dead_letters import InputDeadLettered
from events.memories import (
    MEMORY_TYPES,
    Evidence,
    MemoryAdded,
    MemoryContent,
    MemoryReinforced,
    MemoryType,
    MemoryUpdated,
    derived_id,
)
from events.snapshots import SnapshotExtracted, SnapshotPromoted, SnapshotTurn, snapshot_id
from events.topics import Topics
from events.turns import Principal, SessionFlushRequested, SessionIdled, TurnRecorded, session_key

__all__ = [
    "MEMORY_TYPES",
    "AnyEvent",
    "EventDecodeError",
    "Evidence",
    "InputDeadLettered",
    "MemoryAdded",
    "MemoryContent",
    "MemoryReinforced",
    "MemoryType",
    "MemoryUpdated",
    "Principal",
    "SessionFlushRequested",
    "SessionIdled",
    "SnapshotExtracted",
    "SnapshotPromoted",
    "SnapshotTurn",
    "Topics",
    "TurnRecorded",
    "decode",
    "derived_id",
    "encode",
    "session_key",
    "snapshot_id",
]
