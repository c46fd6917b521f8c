"""What the scale benchmarks write: sessions every memory type asks about, closed sessions of
long ago, and history snapshots the window itself would have promoted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bench.scale_workload import (
    HISTORY_AGE,
    closed_session,
    conversation,
    history_snapshot,
    history_snapshots,
    keyed,
    token_for,
    user_id,
)
from bench.timed_llm import TOKEN
from events.codec import decode
from events.memories import MEMORY_TYPES
from events.snapshots import SnapshotPromoted, SnapshotTurn, snapshot_id
from events.turns import SessionFlushRequested, TurnRecorded
from handlers.extraction.registry import extractor_for
from handlers.session_window import SessionWindow
from handlers.window import WindowPolicy, decide

NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)
POLICY = WindowPolicy(max_messages=20, idle_timeout=timedelta(minutes=5))


def test_tokens_are_session_markers_the_stub_llm_finds() -> None:
    token = token_for("salt", 3, 1)
    assert TOKEN.fullmatch(token)
    assert token == token_for("salt", 3, 1)
    assert token != token_for("salt", 3, 2)


def test_every_memory_type_finds_the_live_conversation_worth_asking_about() -> None:
    messages = conversation(token_for("salt", 0))
    turns = tuple(
        SnapshotTurn(turn_id=f"t{i}", role=m["role"], content=m["content"], occurred_at=NOW)  # type: ignore[arg-type]
        for i, m in enumerate(messages)
    )
    snapshot = SnapshotPromoted(
        event_id=snapshot_id("u", "s", [t.turn_id for t in turns]),
        occurred_at=NOW,
        user_id="u",
        session_id="s",
        seq=0,
        reason="flush",
        turns=turns,
    )
    assert all(extractor_for(t).worth_asking(snapshot) for t in MEMORY_TYPES)


def _promote(events: list[TurnRecorded | SessionFlushRequested]) -> list[SnapshotPromoted]:
    window: SessionWindow | None = None
    promoted: list[SnapshotPromoted] = []
    for offset, event in enumerate(events):
        decision = decide(window, event, offset=offset, policy=POLICY)
        window = decision.window
        promoted.extend(decision.snapshots)
    return promoted


def test_a_closed_session_is_one_old_turn_that_its_flush_promotes() -> None:
    events = closed_session("u1", "c1", NOW)
    turn, flush = events
    assert isinstance(turn, TurnRecorded) and isinstance(flush, SessionFlushRequested)
    assert turn.recorded_at == NOW - HISTORY_AGE
    assert turn.key == flush.key
    (snapshot,) = _promote(events)
    assert snapshot.reason == "flush"
    assert [t.turn_id for t in snapshot.turns] == [turn.event_id]


def test_a_history_snapshot_is_the_one_the_window_promotes_from_its_turns() -> None:
    made = history_snapshot("u1", "h0", token_for("salt", 1), NOW)
    first = made.turns[0]
    flush = SessionFlushRequested(
        event_id="f", occurred_at=NOW + timedelta(minutes=1), user_id="u1", session_id="h0"
    )
    (promoted,) = _promote([*made.turns, flush])
    assert promoted.event_id == made.snapshot.event_id
    assert promoted.turns == made.snapshot.turns
    assert first.key == "u1|h0" and made.snapshot.key == "u1"


def test_history_snapshots_interleave_users_and_never_repeat_an_id() -> None:
    made = history_snapshots("salt", range(3), 2, NOW)
    assert [m.snapshot.user_id for m in made] == [user_id("salt", i) for i in (0, 1, 2)] * 2
    assert len({m.snapshot.event_id for m in made}) == 6
    assert len({t.event_id for m in made for t in m.turns}) == 12


def test_keyed_records_decode_to_the_same_events_under_their_keys() -> None:
    events = closed_session("u1", "c1", NOW)
    for (key, value), event in zip(keyed(events), events, strict=True):
        assert key == b"u1|c1"
        assert decode(value) == event
