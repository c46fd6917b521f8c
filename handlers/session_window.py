"""The state the window keeps per session (`handlers.window` decides on it): its pending turns,
their size and topic, and the recent turn ids that recognise a re-sent turn."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from events.base import UtcDatetime
from events.snapshots import SnapshotTurn
from handlers.snapshot_size import turn_tokens

RECENT_TURNS_REMEMBERED = 64
"""How many of a session's latest turn ids the window remembers to recognise a re-sent turn.

A producer retry or a re-sent record arrives within moments of the original, at most a window
later; 64 covers three full windows at the default `max_messages` (20) at ~60 bytes each."""
NO_TOPIC = {"topic": (), "topic_model": None, "topic_turns": 0}
"""A window's topic fields once its pending turns are promoted or forgotten."""


class RecentTurn(BaseModel):
    """A turn id the window has seen, with a fingerprint of what it said."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turn_id: str
    fingerprint: str


class SessionWindow(BaseModel):
    """The open window of one session: its pending turns and what the window needs to decide."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: str
    session_id: str
    agent_id: str | None = None
    seq: int = 0
    turns: tuple[SnapshotTurn, ...] = ()
    pending_bytes: int = 0
    pending_tokens: int = 0
    """The estimated tokens of the pending turns (`handlers.snapshot_size`)."""
    topic: tuple[float, ...] = ()
    """The mean embedding of the pending turns embedded by `topic_model` (`topic_turns` of them),
    when the topic-shift trigger is on (`handlers.topic_shift`)."""
    topic_model: str | None = None
    topic_turns: int = 0
    last_offset: int = -1
    last_activity_at: UtcDatetime | None = None
    """The latest `recorded_at` among the pending turns (None when nothing is pending)."""
    recent: tuple[RecentTurn, ...] = ()
    latest_input_at: UtcDatetime | None = None
    """The latest `recorded_at` of the session's turns, or the time of a forget request of it:
    the dedup horizon counts from here (None: stored before the field existed)."""
    partition: int | None = None
    """The turns-topic partition the session's records arrive on (None: stored before the field
    existed, or not told), so a user's forget request on that partition finds the window."""

    @classmethod
    def opened(cls, user_id: str, session_id: str) -> SessionWindow:
        return cls(user_id=user_id, session_id=session_id)

    @model_validator(mode="before")
    @classmethod
    def _from_earlier_releases(cls, stored: Any) -> Any:
        """Windows stored by 0.1 kept the processing time of their last turn (`last_turn_at`)
        and no fingerprints: their pending turns count as active at their own event time.
        Windows stored before `pending_tokens` get it counted from their turns."""
        if isinstance(stored, dict) and "pending_tokens" not in stored and stored.get("turns"):
            pending = [SnapshotTurn.model_validate(turn) for turn in stored["turns"]]
            stored = {**stored, "pending_tokens": sum(map(turn_tokens, pending))}
        if isinstance(stored, dict) and "last_turn_at" in stored:
            stored = {key: value for key, value in stored.items() if key != "last_turn_at"}
            turns = stored.get("turns") or []
            stored["last_activity_at"] = turns[-1]["occurred_at"] if turns else None
        return stored
