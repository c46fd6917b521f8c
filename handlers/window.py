"""The session window: turns accumulate per session until it is eligible for promotion.

Pure decisions, `decide(window, input, offset=…, policy=…) -> WindowDecision`, that depend only
on the inputs (docs/architecture.md, "Time"):

* **Time is event time.** A turn counts as activity at its `recorded_at`; an idle command or a
  flush acts at its `occurred_at`. The wall clock only *triggers* the idle command (the timer
  in `streams.window` writes it to the turns topic first), so replaying the turns topic — on
  another machine, a day later — promotes exactly the same snapshots.
* **Identity comes from the turns.** A snapshot's id derives from the ids of the turns it holds
  (`events.snapshots.snapshot_id`); `seq` only numbers a session's snapshots.
* **A turn is promoted once.** A turn whose `event_id` the window has seen recently with the
  same content (a producer retry) is ignored; the same id with other content is a collision,
  rejected with the reason (the stage dead-letters it). Inputs at or below `last_offset` were
  already applied (a redelivery after a crash) and change nothing.
* **A window fits in one record**, and in a prompt budget if one is set. When the next turn
  would push the window past `max_snapshot_bytes`, the pending turns are promoted first (reason
  `count`); past `max_tokens` (`handlers.snapshot_size`), likewise with reason `tokens`; off
  the window's topic (`handlers.topic_shift`), with reason `topic_shift`.
* **State is bounded by open work.** A window with nothing pending is kept for
  `dedup_horizon` after the session's latest turn (to recognise re-sent turns), then retired:
  the idle command that finds it quiet that long deletes it (`WindowDecision.retired`), in
  event time like a promotion. A session that goes on later starts a new window, numbered
  from 0 again (`seq` orders a session's snapshots only within one window's lifetime; ids
  never repeat).

The stage applies a decision by sending its snapshots (waiting for the broker's ack) and then
storing the window; a crash in between re-promotes the same turns under the same id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import orjson

from events.base import at_stored_precision
from events.codec import MAX_EVENT_BYTES
from events.forgetting import SessionForgotten, SessionsForgotten, UserForgotten
from events.memories import derived_id
from events.snapshots import PromotionReason, SnapshotPromoted, SnapshotTurn, snapshot_id
from events.turns import MAX_CONTENT_CHARS, SessionFlushRequested, SessionIdled, TurnRecorded
from handlers.session_window import NO_TOPIC, RECENT_TURNS_REMEMBERED, RecentTurn, SessionWindow
from handlers.snapshot_size import snapshot_turn_bytes, turn_tokens
from handlers.topic_shift import TopicShiftPolicy, TurnVector, is_topic_shift, topic_with

SNAPSHOT_ENVELOPE_BYTES = 2_000
"""An upper bound on a snapshot's bytes besides its turns (ids up to 200 characters, times …)."""
DEFAULT_DEDUP_HORIZON = timedelta(hours=1)
"""How long the window keeps a quiet session's recent turn ids (`WindowPolicy.dedup_horizon`).

The window's state must be bounded by open work, not by every session ever seen (a restart
replays the table): a session with nothing pending is kept only this long after its last turn,
then retired. A producer's retry arrives within seconds; an application that re-sends a whole
conversation does so within minutes. An hour covers both with a wide margin, and keeps the
table at the sessions active in the last hour (10,000 sessions an hour at ~3 kB each: 30 MB)."""
DEFAULT_MAX_SNAPSHOT_BYTES = 512_000
"""Half the largest record (`MAX_EVENT_BYTES`): a single turn (at most 32,000 characters, under
200 kB encoded even if every character needs a 6-byte escape) always fits."""


@dataclass(frozen=True)
class WindowPolicy:
    """When a session becomes eligible for promotion."""

    max_messages: int
    idle_timeout: timedelta
    max_snapshot_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES
    max_tokens: int | None = None
    """The estimated tokens a snapshot may hold (None: no limit); a single turn over it is a
    snapshot of its own."""
    topic_shift: TopicShiftPolicy | None = None
    """When a turn off the window's topic promotes the pending turns (None: never)."""
    max_turn_chars: int = MAX_CONTENT_CHARS
    dedup_horizon: timedelta = DEFAULT_DEDUP_HORIZON
    """How long a session's window outlives its last turn once nothing is pending: until then a
    re-sent turn is recognised (`recent`); then the window is retired (deleted)."""
    sealed: bool = False
    """Whether snapshots are written sealed: the byte budget then counts each turn's sealed
    size (`events.sealed.sealed_text_json_bytes`), so a sealed snapshot stays within it."""

    def __post_init__(self) -> None:
        limit = MAX_EVENT_BYTES - SNAPSHOT_ENVELOPE_BYTES
        if not 10_000 <= self.max_snapshot_bytes <= limit:
            raise ValueError(f"max_snapshot_bytes must be between 10000 and {limit}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1 (or None: no limit)")


@dataclass(frozen=True)
class WindowDecision:
    """The window after an input and the snapshots it promoted; or why the input was ignored
    (`ignored`: nothing to do) or refused (`rejected`: poison input, to be dead-lettered)."""

    window: SessionWindow
    snapshots: tuple[SnapshotPromoted, ...] = ()
    ignored: str | None = None
    rejected: str | None = None
    forgotten: SessionsForgotten | None = None
    """Sent after `snapshots` when the input was a forget request."""
    retired: bool = False
    """The window is to be deleted: nothing pending, quiet for `dedup_horizon`."""


WindowInput = TurnRecorded | SessionFlushRequested | SessionIdled | SessionForgotten


def decide(
    window: SessionWindow | None,
    command: WindowInput,
    *,
    offset: int,
    policy: WindowPolicy,
    partition: int | None = None,
    vector: TurnVector | None = None,
) -> WindowDecision:
    """Apply one input, read at turns-topic `offset` (of `partition`), to its session's window;
    `vector` is a turn's embedding when the topic-shift trigger is on."""
    current = window or SessionWindow.opened(command.user_id, command.session_id)
    if offset <= current.last_offset:
        return WindowDecision(current, ignored=f"offset {offset} already applied")
    current = current.model_copy(update={"last_offset": offset})
    if partition is not None:
        current = current.model_copy(update={"partition": partition})
    if isinstance(command, SessionForgotten):
        fact = sessions_forgotten(command, [command.session_id], partition or 0)
        forgotten = forgotten_turns(current).model_copy(
            update={"latest_input_at": _latest(current.latest_input_at, command.occurred_at)}
        )
        return WindowDecision(forgotten, forgotten=fact)
    if isinstance(command, TurnRecorded):
        return _on_turn(current, command, policy, vector)
    if isinstance(command, SessionFlushRequested):
        if not current.turns:
            return WindowDecision(current, ignored="nothing pending")
        closed, snapshot = _promote(current, "flush", command.occurred_at)
        return WindowDecision(closed, (snapshot,))
    return _on_idle(current, command, policy)


def forgotten_turns(window: SessionWindow) -> SessionWindow:
    """The window with its open turns dropped (docs/architecture.md, "Forgetting").

    What stays is no content: the numbering (`seq`, so a later snapshot of a reused session id
    is numbered on) and the ids and fingerprints of recent turns, so a producer's late retry of
    a forgotten turn is still recognised and not recorded again."""
    return window.model_copy(
        update={
            "turns": (),
            "pending_bytes": 0,
            "pending_tokens": 0,
            **NO_TOPIC,
            "last_activity_at": None,
        }
    )


def forget_user_windows(
    windows: Iterable[SessionWindow], request: UserForgotten, partition: int
) -> tuple[list[SessionWindow], SessionsForgotten]:
    """A user's forget request read on turns-topic `partition`: the user's windows of that
    partition with their open turns dropped, and the fact naming their sessions.

    A window that does not know its partition (stored before windows recorded it) is taken on
    every partition: its turns are older than the request either way."""
    mine = [
        window
        for window in windows
        if window.user_id == request.user_id and window.partition in (partition, None)
    ]
    fact = sessions_forgotten(request, [window.session_id for window in mine], partition)
    return [forgotten_turns(window) for window in mine], fact


def _on_turn(
    window: SessionWindow, turn: TurnRecorded, policy: WindowPolicy, vector: TurnVector | None
) -> WindowDecision:
    fingerprint = turn_fingerprint(turn)
    seen = next((r.fingerprint for r in window.recent if r.turn_id == turn.event_id), None)
    if seen == fingerprint:
        return WindowDecision(window, ignored=f"turn {turn.event_id} was already recorded")
    if seen is not None:
        return WindowDecision(
            window,
            rejected=f"turn id collision: {turn.event_id} was recorded before with other content",
        )
    if len(turn.content) > policy.max_turn_chars:
        return WindowDecision(
            window,
            rejected=f"turn too large: {turn.event_id} has {len(turn.content)} characters, "
            f"more than the limit of {policy.max_turn_chars} (limits.max_turn_chars)",
        )
    pending = _snapshot_turn(turn)
    size = snapshot_turn_bytes(pending, sealed=policy.sealed)
    if size > policy.max_snapshot_bytes:  # alone it would make a snapshot over the limit
        return WindowDecision(
            window,
            rejected=f"turn too large for a snapshot: {turn.event_id} takes {size} bytes, "
            f"more than max_snapshot_bytes ({policy.max_snapshot_bytes})",
        )
    tokens = turn_tokens(pending)
    snapshots: list[SnapshotPromoted] = []
    if window.turns and (reason := _full_before(window, size, tokens, policy, vector)) is not None:
        window, snapshot = _promote(window, reason, turn.recorded_at)
        snapshots.append(snapshot)
    window = _with_turn(window, turn, pending, (size, tokens), fingerprint)
    if vector is not None:
        topic, count = topic_with(window.topic, window.topic_model, window.topic_turns, vector)
        window = window.model_copy(
            update={"topic": topic, "topic_model": vector.model, "topic_turns": count}
        )
    if (reason := _full_after(window, policy)) is not None:
        window, snapshot = _promote(window, reason, turn.recorded_at)
        snapshots.append(snapshot)
    return WindowDecision(window, tuple(snapshots))


def _full_before(
    window: SessionWindow, size: int, tokens: int, policy: WindowPolicy, vector: TurnVector | None
) -> PromotionReason | None:
    """Why the pending turns go first: the next turn would take them past a budget, or off
    their topic."""
    if window.pending_bytes + size > policy.max_snapshot_bytes:
        return "count"
    if policy.max_tokens is not None and window.pending_tokens + tokens > policy.max_tokens:
        return "tokens"
    shift = policy.topic_shift
    if shift is None or vector is None:
        return None
    leaves = is_topic_shift(window.topic, window.topic_model, window.topic_turns, vector, shift)
    return "topic_shift" if leaves else None


def _full_after(window: SessionWindow, policy: WindowPolicy) -> PromotionReason | None:
    """Why the window is promoted with its newest turn: it is full."""
    if len(window.turns) >= policy.max_messages:
        return "count"
    if policy.max_tokens is not None and window.pending_tokens >= policy.max_tokens:
        return "tokens"
    return None


def _with_turn(
    window: SessionWindow,
    turn: TurnRecorded,
    pending: SnapshotTurn,
    cost: tuple[int, int],
    fingerprint: str,
) -> SessionWindow:
    last = window.last_activity_at
    recent = (*window.recent, RecentTurn(turn_id=turn.event_id, fingerprint=fingerprint))
    size, tokens = cost
    return window.model_copy(
        update={
            "turns": (*window.turns, pending),
            "pending_bytes": window.pending_bytes + size,
            "pending_tokens": window.pending_tokens + tokens,
            "last_activity_at": turn.recorded_at if last is None else max(last, turn.recorded_at),
            "agent_id": turn.agent_id or window.agent_id,
            "recent": recent[-RECENT_TURNS_REMEMBERED:],
            "latest_input_at": _latest(window.latest_input_at, turn.recorded_at),
        }
    )


def _on_idle(window: SessionWindow, command: SessionIdled, policy: WindowPolicy) -> WindowDecision:
    if command.window_seq != window.seq:
        return WindowDecision(window, ignored=f"stale idle command for window {command.window_seq}")
    if is_retired(window, command.occurred_at, policy):
        return WindowDecision(window, retired=True)
    if not is_idle(window, command.occurred_at, policy):
        return WindowDecision(window, ignored=f"session was not idle at {command.occurred_at}")
    closed, snapshot = _promote(window, "idle", command.occurred_at)
    return WindowDecision(closed, (snapshot,))


def _snapshot_turn(turn: TurnRecorded) -> SnapshotTurn:
    return SnapshotTurn(
        turn_id=turn.event_id,
        role=turn.role,
        name=turn.name,
        tool_name=turn.tool_name,
        content=turn.content,
        occurred_at=turn.occurred_at,
    )


def _promote(
    window: SessionWindow, reason: PromotionReason, at: datetime
) -> tuple[SessionWindow, SnapshotPromoted]:
    snapshot = SnapshotPromoted(
        event_id=snapshot_id(window.user_id, window.session_id, [t.turn_id for t in window.turns]),
        occurred_at=at,
        user_id=window.user_id,
        session_id=window.session_id,
        agent_id=window.agent_id,
        seq=window.seq,
        reason=reason,
        turns=window.turns,
    )
    closed = window.model_copy(
        update={
            "seq": window.seq + 1,
            "turns": (),
            "pending_bytes": 0,
            "pending_tokens": 0,
            **NO_TOPIC,
            "last_activity_at": None,
        }
    )
    return closed, snapshot


def is_idle(window: SessionWindow, at: datetime, policy: WindowPolicy) -> bool:
    """A window with pending turns whose latest activity is `idle_timeout` or more before `at`."""
    if not window.turns or window.last_activity_at is None:
        return False
    return at - window.last_activity_at >= policy.idle_timeout


def is_retired(window: SessionWindow, at: datetime, policy: WindowPolicy) -> bool:
    """A window with nothing pending whose latest input is `dedup_horizon` or more before `at`
    (or unknown: a window stored before the field existed)."""
    if window.turns:
        return False
    latest = window.latest_input_at
    return latest is None or at - latest >= policy.dedup_horizon


def _latest(known: datetime | None, at: datetime) -> datetime:
    return at if known is None else max(known, at)


def turn_fingerprint(turn: TurnRecorded) -> str:
    """What a turn said, hashed: the same event sent twice has the same fingerprint.

    `recorded_at` is left out, so a client that re-sends a turn under its id with a new
    recording time is still recognised as re-sending it.
    """
    fields = at_stored_precision(turn.model_dump(exclude={"recorded_at"}))
    return hashlib.sha256(orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def sessions_forgotten(
    request: SessionForgotten | UserForgotten, session_ids: Iterable[str], turns_partition: int
) -> SessionsForgotten:
    """The fact a window partition writes after dropping the open turns of `session_ids`."""
    return SessionsForgotten(
        event_id=derived_id("sessions-forgotten", request.event_id, turns_partition),
        occurred_at=request.occurred_at,
        request_id=request.event_id,
        scope="session" if isinstance(request, SessionForgotten) else "user",
        user_id=request.user_id,
        session_ids=tuple(dict.fromkeys(session_ids)),
        turns_partition=turns_partition,
    )
