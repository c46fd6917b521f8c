"""The session window: pure promotion decisions (count, flush, idle), idempotent by offset."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest

from events import SessionIdled, SnapshotPromoted, TurnRecorded, derived_id, snapshot_id
from handlers.window import (
    SessionWindow,
    WindowDecision,
    WindowInput,
    WindowPolicy,
    decide,
    idle_command,
    is_idle,
)
from tests.factories import CLOCK, at, flush, idle, turn

POLICY = WindowPolicy(max_messages=3, idle_timeout=timedelta(seconds=60))


def feed(
    inputs: Sequence[WindowInput],
    *,
    window: SessionWindow | None = None,
    policy: WindowPolicy = POLICY,
    start_offset: int = 0,
    now: datetime = CLOCK,
) -> tuple[SessionWindow, list[SnapshotPromoted], list[WindowDecision]]:
    """Apply `inputs` at consecutive offsets; the final window, the snapshots and all decisions."""
    decisions = []
    snapshots = []
    for offset, command in enumerate(inputs, start=start_offset):
        decision = decide(window, command, offset=offset, now=now, policy=policy)
        decisions.append(decision)
        window = decision.window
        if decision.snapshot is not None:
            snapshots.append(decision.snapshot)
    assert window is not None
    return window, snapshots, decisions


def turns(count: int, **overrides: object) -> list[TurnRecorded]:
    return [turn(content=f"message {i}", **overrides) for i in range(count)]


# --- count ----------------------------------------------------------------------------------------


def test_turns_below_max_messages_stay_pending() -> None:
    pending = turns(2)
    window, snapshots, decisions = feed(list(pending))
    assert snapshots == []
    assert all(d.ignored is None for d in decisions)
    assert [t.turn_id for t in window.turns] == [t.event_id for t in pending]
    assert window.seq == 0
    assert window.last_offset == 1
    assert window.last_turn_at == CLOCK


def test_count_promotion_at_exactly_max_messages() -> None:
    sent = turns(3, agent_id="agent-1")
    window, snapshots, decisions = feed(list(sent))
    assert [d.snapshot is not None for d in decisions] == [False, False, True]
    (snap,) = snapshots
    assert snap.reason == "count"
    assert snap.seq == 0
    assert snap.event_id == snapshot_id("u1", "s1", 0)
    assert (snap.user_id, snap.session_id, snap.agent_id) == ("u1", "s1", "agent-1")
    assert [t.turn_id for t in snap.turns] == [t.event_id for t in sent]
    assert [t.content for t in snap.turns] == ["message 0", "message 1", "message 2"]
    assert snap.occurred_at == CLOCK
    assert window.turns == ()
    assert window.seq == 1
    assert window.last_offset == 2


def test_snapshot_turn_carries_the_turn_fields() -> None:
    sent = [
        turn(name="Tim", content="hi", occurred_at=at(-5)),
        turn(role="assistant", name="John", content="I am a nurse."),
        turn(role="tool", tool_name="search", content="{}"),
    ]
    _, (snap,), _ = feed(sent)
    first, second, third = snap.turns
    assert (first.role, first.name, first.content, first.occurred_at) == (
        "user",
        "Tim",
        "hi",
        at(-5),
    )
    assert (second.role, second.name) == ("assistant", "John")
    assert (third.role, third.name, third.tool_name) == ("tool", None, "search")


def test_long_session_gives_contiguous_non_overlapping_snapshots() -> None:
    sent = turns(10)
    window, snapshots, _ = feed(list(sent))
    assert [s.seq for s in snapshots] == [0, 1, 2]
    assert [s.event_id for s in snapshots] == [snapshot_id("u1", "s1", n) for n in range(3)]
    promoted = [t.turn_id for s in snapshots for t in s.turns]
    assert promoted == [t.event_id for t in sent[:9]]
    assert [t.turn_id for t in window.turns] == [sent[9].event_id]
    assert window.seq == 3


@pytest.mark.parametrize("max_messages", [1, 2, 5])
def test_every_max_messages_turns_promote(max_messages: int) -> None:
    policy = WindowPolicy(max_messages=max_messages, idle_timeout=timedelta(seconds=60))
    _, snapshots, _ = feed(turns(max_messages * 3), policy=policy)
    assert [len(s.turns) for s in snapshots] == [max_messages] * 3


def test_agent_id_is_kept_from_an_earlier_turn() -> None:
    _, (snap,), _ = feed([turn(agent_id="agent-7"), turn(), turn()])
    assert snap.agent_id == "agent-7"


# --- flush ----------------------------------------------------------------------------------------


def test_flush_promotes_pending_turns() -> None:
    sent = turns(2)
    window, snapshots, decisions = feed([*sent, flush()])
    (snap,) = snapshots
    assert decisions[-1].snapshot == snap
    assert snap.reason == "flush"
    assert snap.seq == 0
    assert [t.turn_id for t in snap.turns] == [t.event_id for t in sent]
    assert window.turns == ()
    assert window.seq == 1


@pytest.mark.parametrize("history", [[], turns(3)], ids=["fresh", "just-promoted"])
def test_flush_on_an_empty_window_is_ignored(history: list[TurnRecorded]) -> None:
    window, snapshots, decisions = feed([*history, flush()])
    assert decisions[-1].snapshot is None
    assert decisions[-1].ignored == "empty"
    assert window.seq == (1 if history else 0)
    assert window.last_offset == len(history)  # the input still counts as applied
    assert len(snapshots) == (1 if history else 0)


def test_flush_of_a_new_session_opens_its_window() -> None:
    decision = decide(
        None, flush(user_id="u9", session_id="s9"), offset=4, now=CLOCK, policy=POLICY
    )
    assert (decision.window.user_id, decision.window.session_id) == ("u9", "s9")
    assert decision.window.last_offset == 4


# --- idle -----------------------------------------------------------------------------------------


def _pending_window() -> SessionWindow:
    window, _, _ = feed(turns(2), now=CLOCK)
    return window


@pytest.mark.parametrize(
    ("elapsed", "promoted"),
    [(0, False), (59.999, False), (60, True), (61, True), (3_600, True)],
)
def test_idle_command_promotes_only_when_the_session_is_idle(
    elapsed: float, promoted: bool
) -> None:
    window = _pending_window()
    decision = decide(window, idle(0), offset=10, now=at(elapsed), policy=POLICY)
    if promoted:
        assert decision.snapshot is not None
        assert decision.snapshot.reason == "idle"
        assert decision.snapshot.seq == 0
        assert decision.snapshot.occurred_at == at(elapsed)
        assert len(decision.snapshot.turns) == 2
        assert decision.window.turns == ()
        assert decision.window.seq == 1
    else:
        assert decision.snapshot is None
        assert decision.ignored == "session is not idle"
        assert decision.window.turns == window.turns
    assert decision.window.last_offset == 10


def test_idle_is_measured_from_the_last_turn() -> None:
    window, _, _ = feed([turn()], now=CLOCK)
    window, _, _ = feed([turn()], window=window, start_offset=1, now=at(50))
    assert decide(window, idle(0), offset=2, now=at(70), policy=POLICY).snapshot is None
    assert decide(window, idle(0), offset=2, now=at(110), policy=POLICY).snapshot is not None


@pytest.mark.parametrize("window_seq", [1, 2, 7])
def test_idle_command_for_another_window_is_ignored(window_seq: int) -> None:
    decision = decide(_pending_window(), idle(window_seq), offset=10, now=at(600), policy=POLICY)
    assert decision.snapshot is None
    assert decision.ignored == f"stale idle command for window {window_seq}"


def test_stale_idle_command_after_a_count_promotion_is_ignored() -> None:
    window = _pending_window()
    command = idle_command(window, at(60))  # timer fires for window 0 ...
    window, (snap,), _ = feed([turn()], window=window, start_offset=2, now=at(61))  # ... count wins
    assert snap.seq == 0
    window, _, _ = feed([turn()], window=window, start_offset=3, now=at(62))
    decision = decide(window, command, offset=4, now=at(600), policy=POLICY)
    assert decision.snapshot is None
    assert decision.ignored is not None
    assert "stale" in decision.ignored
    assert len(decision.window.turns) == 1


def test_idle_command_on_an_empty_window_is_ignored() -> None:
    window, _, _ = feed(turns(3))
    decision = decide(window, idle(1), offset=3, now=at(600), policy=POLICY)
    assert decision.snapshot is None
    assert decision.ignored == "session is not idle"


def test_is_idle() -> None:
    assert not is_idle(SessionWindow.opened("u1", "s1"), at(10_000), POLICY)
    window = _pending_window()
    assert not is_idle(window, at(59), POLICY)
    assert is_idle(window, at(60), POLICY)
    emptied = window.model_copy(update={"turns": ()})
    assert not is_idle(emptied, at(600), POLICY)
    unknown_time = window.model_copy(update={"last_turn_at": None})
    assert not is_idle(unknown_time, at(600), POLICY)


def test_idle_command_targets_the_current_window() -> None:
    window, _, _ = feed(turns(4))
    command = idle_command(window, at(90))
    assert isinstance(command, SessionIdled)
    assert (command.user_id, command.session_id, command.window_seq) == ("u1", "s1", 1)
    assert command.occurred_at == at(90)
    assert command.key == "u1|s1"
    assert command.event_id == derived_id("idle", "u1", "s1", 1)
    assert idle_command(window, at(95)).event_id == command.event_id  # deterministic per window


# --- redelivery -----------------------------------------------------------------------------------


def test_redelivered_turn_is_ignored() -> None:
    first = turn()
    window, _, _ = feed([first, turn()])
    decision = decide(window, first, offset=0, now=at(5), policy=POLICY)
    assert decision.ignored == "offset 0 already applied"
    assert decision.window == window
    assert decision.snapshot is None


def test_redelivered_turn_after_a_promotion_is_in_one_snapshot_only() -> None:
    sent = turns(3)
    window, (snap,), _ = feed(list(sent))
    for offset, command in enumerate(sent):
        decision = decide(window, command, offset=offset, now=at(1), policy=POLICY)
        assert decision.ignored is not None
        assert decision.snapshot is None
        assert decision.window == window
    assert window.turns == ()
    assert [t.turn_id for t in snap.turns] == [t.event_id for t in sent]


@pytest.mark.parametrize("command", [flush(), idle(0)], ids=["flush", "idle"])
def test_redelivered_close_command_is_ignored(command: WindowInput) -> None:
    window, _, _ = feed([*turns(2), command], now=at(0))
    assert window.seq == (1 if command.event_type == "SessionFlushRequested" else 0)
    again = decide(window, command, offset=2, now=at(600), policy=POLICY)
    assert again.snapshot is None
    assert again.window == window


def test_crash_before_storing_the_window_repeats_the_same_snapshot() -> None:
    sent = turns(3)
    before, _, _ = feed(sent[:2])
    first = decide(before, sent[2], offset=2, now=CLOCK, policy=POLICY)
    # The window was not stored: the turn is read again at the same offset.
    second = decide(before, sent[2], offset=2, now=CLOCK, policy=POLICY)
    assert first.snapshot is not None
    assert first.snapshot == second.snapshot
    assert first.window == second.window


def test_snapshot_ids_are_deterministic_across_replays() -> None:
    sent = turns(7)
    _, once, _ = feed(list(sent), now=CLOCK)
    _, again, _ = feed(list(sent), now=at(3_600))
    assert [s.event_id for s in once] == [s.event_id for s in again]
    assert [s.event_id for s in once] == [snapshot_id("u1", "s1", n) for n in (0, 1)]


def test_sessions_have_distinct_snapshot_ids() -> None:
    _, (a,), _ = feed(turns(3, session_id="a"))
    _, (b,), _ = feed(turns(3, session_id="b"))
    _, (c,), _ = feed(turns(3, user_id="other", session_id="a"))
    assert len({a.event_id, b.event_id, c.event_id}) == 3
    assert c.key == "other"


# --- property: random interleavings ---------------------------------------------------------------


def _random_run(seed: int) -> tuple[list[tuple[WindowInput, datetime]], WindowPolicy]:
    """A random session: turns, flushes and idle commands for the current, an old or a future
    window (the generator follows the window so that most idle commands are not stale)."""
    rng = random.Random(seed)
    policy = WindowPolicy(
        max_messages=rng.randint(1, 6), idle_timeout=timedelta(seconds=rng.choice([5, 30, 60]))
    )
    inputs: list[tuple[WindowInput, datetime]] = []
    window: SessionWindow | None = None
    clock = CLOCK
    for offset in range(rng.randint(20, 80)):
        clock += timedelta(seconds=rng.choice([0, 1, 3, 10, 45, 120]))
        kind = rng.random()
        command: WindowInput
        if kind < 0.65:
            role = rng.choice(["user", "assistant"])
            command = turn(role=role, content=f"m{offset}", occurred_at=clock)
        elif kind < 0.75:
            command = flush(occurred_at=clock)
        else:
            seq = window.seq if window is not None else 0
            command = idle(max(0, seq + rng.choice([-1, 0, 0, 0, 1])), occurred_at=clock)
        inputs.append((command, clock))
        window = decide(window, command, offset=offset, now=clock, policy=policy).window
    return inputs, policy


def _run(
    inputs: list[tuple[WindowInput, datetime]],
    policy: WindowPolicy,
    window: SessionWindow | None = None,
    start: int = 0,
) -> tuple[SessionWindow | None, list[SnapshotPromoted]]:
    snapshots = []
    for offset, (command, now) in enumerate(inputs[start:], start=start):
        decision = decide(window, command, offset=offset, now=now, policy=policy)
        window = decision.window
        if decision.snapshot is not None:
            snapshots.append(decision.snapshot)
    return window, snapshots


SEEDS = list(range(12))


@pytest.mark.parametrize("seed", SEEDS)
def test_every_turn_lands_in_exactly_one_place(seed: int) -> None:
    inputs, policy = _random_run(seed)
    window, snapshots = _run(inputs, policy)
    assert window is not None
    sent = [c.event_id for c, _ in inputs if isinstance(c, TurnRecorded)]
    placed = [t.turn_id for s in snapshots for t in s.turns] + [t.turn_id for t in window.turns]
    assert placed == sent  # each once, in order
    assert [s.seq for s in snapshots] == list(range(len(snapshots)))
    assert window.seq == len(snapshots)
    assert all(1 <= len(s.turns) <= policy.max_messages for s in snapshots)
    assert all(len(s.turns) == policy.max_messages for s in snapshots if s.reason == "count")
    assert len(window.turns) < policy.max_messages
    assert window.last_offset == len(inputs) - 1


@pytest.mark.parametrize("seed", SEEDS)
def test_redelivering_any_prefix_changes_nothing(seed: int) -> None:
    inputs, policy = _random_run(seed)
    final, snapshots = _run(inputs, policy)
    rng = random.Random(seed)
    for _ in range(5):
        prefix = rng.randint(1, len(inputs))
        window, again = _run(inputs[:prefix], policy, window=final)
        assert again == []
        assert window == final
    assert len(snapshots) == len({s.event_id for s in snapshots})


@pytest.mark.parametrize("seed", SEEDS)
def test_restart_from_an_older_offset_gives_the_same_result(seed: int) -> None:
    """A worker stored its window after input k but committed only offset j <= k + 1."""
    inputs, policy = _random_run(seed)
    final, snapshots = _run(inputs, policy)
    rng = random.Random(seed + 1000)
    for _ in range(5):
        stored_after = rng.randint(0, len(inputs) - 1)
        stored, before = _run(inputs[: stored_after + 1], policy)
        committed = rng.randint(0, stored_after + 1)
        window, after = _run(inputs, policy, window=stored, start=committed)
        assert window == final
        assert before + after == snapshots
