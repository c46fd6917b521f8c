"""The session window: turns accumulate per session until it is eligible for promotion.

Pure decisions, `decide(window, input, offset, now) -> WindowDecision`. The stream agent applies a
decision by sending its snapshot (if any) and then storing its window. Every input carries the
turns-topic offset it was read at; inputs at or below `window.last_offset` were already applied
(a redelivery after a crash) and change nothing, which makes promotion effectively-once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict

from events.base import UtcDatetime
from events.memories import derived_id
from events.snapshots import PromotionReason, SnapshotPromoted, SnapshotTurn, snapshot_id
from events.turns import SessionFlushRequested, SessionIdled, TurnRecorded


class SessionWindow(BaseModel):
    """The open window of one session: its pending turns and the next snapshot's seq."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: str
    session_id: str
    agent_id: str | None = None
    seq: int = 0
    turns: tuple[SnapshotTurn, ...] = ()
    last_offset: int = -1
    last_turn_at: UtcDatetime | None = None

    @classmethod
    def opened(cls, user_id: str, session_id: str) -> SessionWindow:
        return cls(user_id=user_id, session_id=session_id)


@dataclass(frozen=True)
class WindowPolicy:
    """When a session becomes eligible for promotion."""

    max_messages: int
    idle_timeout: timedelta


@dataclass(frozen=True)
class WindowDecision:
    """The window after an input, the snapshot it promoted (if any), or why it was ignored."""

    window: SessionWindow
    snapshot: SnapshotPromoted | None = None
    ignored: str | None = None


WindowInput = TurnRecorded | SessionFlushRequested | SessionIdled


def decide(
    window: SessionWindow | None,
    command: WindowInput,
    *,
    offset: int,
    now: datetime,
    policy: WindowPolicy,
) -> WindowDecision:
    """Apply one input read at `offset` (processing time `now`) to a session's window."""
    current = window or SessionWindow.opened(command.user_id, command.session_id)
    if offset <= current.last_offset:
        return WindowDecision(current, ignored=f"offset {offset} already applied")
    current = current.model_copy(update={"last_offset": offset})
    if isinstance(command, TurnRecorded):
        return _on_turn(current, command, now, policy)
    if isinstance(command, SessionFlushRequested):
        return _promote(current, "flush", now) if current.turns else _ignore(current, "empty")
    return _on_idle(current, command, now, policy)


def _on_turn(
    window: SessionWindow, turn: TurnRecorded, now: datetime, policy: WindowPolicy
) -> WindowDecision:
    pending = SnapshotTurn(
        turn_id=turn.event_id,
        role=turn.role,
        name=turn.name,
        tool_name=turn.tool_name,
        content=turn.content,
        occurred_at=turn.occurred_at,
    )
    window = window.model_copy(
        update={
            "turns": (*window.turns, pending),
            "last_turn_at": now,
            "agent_id": turn.agent_id or window.agent_id,
        }
    )
    if len(window.turns) >= policy.max_messages:
        return _promote(window, "count", now)
    return WindowDecision(window)


def _on_idle(
    window: SessionWindow, command: SessionIdled, now: datetime, policy: WindowPolicy
) -> WindowDecision:
    if command.window_seq != window.seq:
        return _ignore(window, f"stale idle command for window {command.window_seq}")
    if not is_idle(window, now, policy):
        return _ignore(window, "session is not idle")
    return _promote(window, "idle", now)


def _ignore(window: SessionWindow, reason: str) -> WindowDecision:
    return WindowDecision(window, ignored=reason)


def _promote(window: SessionWindow, reason: PromotionReason, now: datetime) -> WindowDecision:
    snapshot = SnapshotPromoted(
        event_id=snapshot_id(window.user_id, window.session_id, window.seq),
        occurred_at=now,
        user_id=window.user_id,
        session_id=window.session_id,
        agent_id=window.agent_id,
        seq=window.seq,
        reason=reason,
        turns=window.turns,
    )
    closed = window.model_copy(update={"seq": window.seq + 1, "turns": ()})
    return WindowDecision(closed, snapshot=snapshot)


def is_idle(window: SessionWindow, now: datetime, policy: WindowPolicy) -> bool:
    """A window with pending turns whose last turn arrived `idle_timeout` ago or longer."""
    if not window.turns or window.last_turn_at is None:
        return False
    return now - window.last_turn_at >= policy.idle_timeout


def idle_command(window: SessionWindow, now: datetime) -> SessionIdled:
    """The command the idle timer sends through the turns topic for an idle window."""
    return SessionIdled(
        event_id=derived_id("idle", window.user_id, window.session_id, window.seq),
        occurred_at=now,
        user_id=window.user_id,
        session_id=window.session_id,
        window_seq=window.seq,
    )
