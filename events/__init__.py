"""Immutable event models, the codec and topic names. Imports neither faust nor pymongo."""

from events.codec import AnyEvent, EventDecodeError, EventTooLarge, decode, encode
from events.consolidations import MemoriesConsolidated, MemoryConsolidationRequested
from events.dead_letters import DeadLetterRedriven, InputDeadLettered
from events.memories import (
    ASSISTANT_SUBJECT,
    MEMORY_TYPES,
    USER_SUBJECT,
    Evidence,
    LLMUsage,
    MemoryAdded,
    MemoryContent,
    MemoryDecision,
    MemoryEvent,
    MemoryReinforced,
    MemoryType,
    MemoryUpdated,
    Owner,
    Provenance,
    derived_id,
)
from events.rollbacks import MemoryRollbackRequested, MemoryRolledBack
from events.saves import MemorySaved, MemorySaveRequested
from events.snapshots import SnapshotExtracted, SnapshotPromoted, SnapshotTurn, snapshot_id
from events.topics import Topics
from events.turns import (
    MAX_CONTENT_CHARS,
    ROLES,
    Principal,
    Role,
    SessionFlushRequested,
    SessionIdled,
    TurnRecorded,
    session_key,
    speaker_name_problem,
)

__all__ = [
    "ASSISTANT_SUBJECT",
    "MAX_CONTENT_CHARS",
    "MEMORY_TYPES",
    "ROLES",
    "USER_SUBJECT",
    "AnyEvent",
    "DeadLetterRedriven",
    "EventDecodeError",
    "EventTooLarge",
    "Evidence",
    "InputDeadLettered",
    "LLMUsage",
    "MemoriesConsolidated",
    "MemoryAdded",
    "MemoryConsolidationRequested",
    "MemoryContent",
    "MemoryDecision",
    "MemoryEvent",
    "MemoryReinforced",
    "MemoryRollbackRequested",
    "MemoryRolledBack",
    "MemorySaveRequested",
    "MemorySaved",
    "MemoryType",
    "MemoryUpdated",
    "Owner",
    "Principal",
    "Provenance",
    "Role",
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
    "speaker_name_problem",
]
