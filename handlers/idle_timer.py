"""The idle timer's decisions: when to write an idle command for a session's window, and the
command (docs/architecture.md, "Time": the wall clock only triggers a command written to the log;
the window decides on the command's own time, `handlers.window`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from events.memories import derived_id
from events.turns import SessionIdled
from handlers.session_window import SessionWindow
from handlers.window import WindowPolicy, is_idle, is_retired


@dataclass(frozen=True)
class IdleRequest:
    """The idle timer's last request for a session: for which window, at what wall time."""

    window_seq: int
    at: datetime


def should_request_idle(
    window: SessionWindow,
    now: datetime,
    policy: WindowPolicy,
    last_request: IdleRequest | None,
) -> bool:
    """Whether the idle timer should write an idle command for `window` at wall time `now`.

    Only for a window idle as of `now` (one with pending turns to promote, or one with nothing
    pending to retire), and not again for the same window until another `idle_timeout` (at
    least a second) has passed: the first command may still be on its way.
    """
    if not (is_idle(window, now, policy) or is_retired(window, now, policy)):
        return False
    if last_request is None or last_request.window_seq != window.seq:
        return True
    resend_after = max(policy.idle_timeout, timedelta(seconds=1))
    return now - last_request.at >= resend_after


def idle_command(window: SessionWindow, now: datetime) -> SessionIdled:
    """The command the idle timer writes to the turns topic for a window idle at `now`."""
    return SessionIdled(
        event_id=derived_id("idle", window.user_id, window.session_id, window.seq, now.isoformat()),
        occurred_at=now,
        user_id=window.user_id,
        session_id=window.session_id,
        window_seq=window.seq,
    )
