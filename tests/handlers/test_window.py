"""The session window: pure promotion decisions (count, bytes, flush, idle) in event time."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import timedelta

import orjson
import pytest

from events import SessionIdled, SnapshotPromoted, TurnRecorded, derived_id, encode, snapshot_id
from events.codec import MAX_EVENT_BYTES
from handlers.idle_timer import IdleRequest, idle_command, should_request_idle
from handlers.session_window import RECENT_TURNS_REMEMBERED, SessionWindow
from handlers.snapshot_size import snapshot_turn_bytes, turn_tokens
from handlers.topic_shift import TopicShiftPolicy, TurnVector
from handlers.window import (
    WindowDecision,
    WindowInput,
    WindowPolicy,
    decide,
    forget_user_windows,
    forgotten_turns,
    is_idle,
    is_retired,
    turn_fingerprint,
)
from tests import factories as f
from tests.factories import CLOCK, at, flush, idle, turn

POLICY = WindowPolicy(max_messages=3, idle_timeout=timedelta(seconds=60))


def feed(
    inputs: Sequence[WindowInput],
    *,
    window: SessionWindow | None = None,
    policy: WindowPolicy = POLICY,
    start_offset: int = 0,
) -> tuple[SessionWindow, list[SnapshotPromoted], list[WindowDecision]]:
    """Apply `inputs` at consecutive offsets; the final window, the snapshots and all decisions."""
    decisions = []
    snapshots: list[SnapshotPromoted] = []
    for offset, command in enumerate(inputs, start=start_offset):
        decision = decide(window, command, offset=offset, policy=policy)
        decisions.append(decision)
        if not decision.ignored and not decision.rejected:
            window = decision.window
        snapshots.extend(decision.snapshots)
    return window or decisions[-1].window, snapshots, decisions


def turns(count: int, **overrides: object) -> list[TurnRecorded]:
    return [turn(content=f"message {i}", **overrides) for i in range(count)]


def recorded(seconds: float, **overrides: object) -> TurnRecorded:
    """A turn recorded `seconds` after CLOCK (said at the same time unless overridden)."""
    fields: dict[str, object] = {"occurred_at": at(seconds), "recorded_at": at(seconds)}
    fields.update(overrides)
    return turn(**fields)


# --- count ----------------------------------------------------------------------------------------


def test_turns_below_max_messages_stay_pending() -> None:
    pending = [recorded(0), recorded(5)]
    window, snapshots, decisions = feed(pending)
    assert snapshots == []
    assert all(d.ignored is None and d.rejected is None for d in decisions)
    assert [t.turn_id for t in window.turns] == [t.event_id for t in pending]
    assert window.seq == 0
    assert window.last_offset == 1
    assert window.last_activity_at == at(5)


def test_count_promotion_at_exactly_max_messages() -> None:
    sent = [recorded(i, agent_id="agent-1", content=f"message {i}") for i in range(3)]
    window, snapshots, decisions = feed(sent)
    assert [len(d.snapshots) for d in decisions] == [0, 0, 1]
    (snap,) = snapshots
    assert snap.reason == "count"
    assert snap.seq == 0
    assert snap.event_id == snapshot_id("u1", "s1", [t.event_id for t in sent])
    assert (snap.user_id, snap.session_id, snap.agent_id) == ("u1", "s1", "agent-1")
    assert [t.content for t in snap.turns] == ["message 0", "message 1", "message 2"]
    assert snap.occurred_at == at(2)  # the event time of the turn that filled the window
    assert window.turns == ()
    assert window.seq == 1
    assert window.last_activity_at is None


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
    window, snapshots, _ = feed(sent)
    assert [s.seq for s in snapshots] == [0, 1, 2]
    promoted = [t.turn_id for s in snapshots for t in s.turns]
    assert promoted == [t.event_id for t in sent[:9]]
    assert [s.event_id for s in snapshots] == [
        snapshot_id("u1", "s1", [t.event_id for t in sent[n : n + 3]]) for n in (0, 3, 6)
    ]
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


# --- bytes ----------------------------------------------------------------------------------------

BYTES_POLICY = WindowPolicy(
    max_messages=100, idle_timeout=timedelta(seconds=60), max_snapshot_bytes=100_000
)


def test_a_turn_that_would_cross_the_byte_budget_promotes_the_window_first() -> None:
    big = [recorded(i, content=chr(ord("a") + i) * 30_000) for i in range(4)]
    window, snapshots, decisions = feed(big, policy=BYTES_POLICY)
    assert [len(d.snapshots) for d in decisions] == [0, 0, 0, 1]
    (snap,) = snapshots
    assert [t.turn_id for t in snap.turns] == [t.event_id for t in big[:3]]
    assert (snap.reason, snap.occurred_at) == ("count", at(3))
    assert [t.turn_id for t in window.turns] == [big[3].event_id]
    assert window.pending_bytes == snapshot_turn_bytes(window.turns[0])
    assert len(encode(snap)) <= BYTES_POLICY.max_snapshot_bytes + 2_000


def test_the_largest_possible_turn_always_fits_a_snapshot_record() -> None:
    # Every character of the longest content needs a 6-byte JSON escape.
    worst = turn(content="\x01" * 32_000, name="N" * 100)
    policy = WindowPolicy(max_messages=1, idle_timeout=timedelta(seconds=60))
    _, (snap,), _ = feed([worst], policy=policy)
    assert len(encode(snap)) < MAX_EVENT_BYTES


def test_a_window_never_encodes_beyond_its_byte_budget_plus_the_envelope() -> None:
    rng = random.Random(7)
    sent = [recorded(i, content="y" * rng.randint(1, 32_000)) for i in range(60)]
    _, snapshots, _ = feed(sent, policy=BYTES_POLICY)
    assert snapshots
    for snap in snapshots:
        assert len(encode(snap)) <= BYTES_POLICY.max_snapshot_bytes + 2_000


@pytest.mark.parametrize("budget", [9_999, MAX_EVENT_BYTES])
def test_a_byte_budget_outside_the_record_limit_is_refused(budget: int) -> None:
    with pytest.raises(ValueError, match="max_snapshot_bytes"):
        WindowPolicy(max_messages=3, idle_timeout=timedelta(seconds=1), max_snapshot_bytes=budget)


def test_snapshot_turn_bytes_is_the_encoded_size_plus_a_separator() -> None:
    _, (snap,), _ = feed(turns(3))
    expected = sum(len(orjson.dumps(t.model_dump(mode="json"))) + 1 for t in snap.turns)
    assert sum(snapshot_turn_bytes(t) for t in snap.turns) == expected


# --- tokens ---------------------------------------------------------------------------------------

TOKENS_POLICY = WindowPolicy(max_messages=100, idle_timeout=timedelta(seconds=60), max_tokens=40)
"""A turn of `said(n)` is n + 4 estimated tokens (`handlers.snapshot_size`)."""


def said(tokens: int, seconds: float = 0) -> TurnRecorded:
    """A turn whose content is estimated at `tokens` tokens (four ASCII characters each)."""
    return recorded(seconds, content="abcd" * tokens)


def test_the_pending_turns_are_promoted_before_a_turn_that_would_pass_max_tokens() -> None:
    sent = [said(10, 0), said(10, 1), said(10, 2)]  # 14 + 14 fit in 40; a third would not
    window, snapshots, decisions = feed(sent, policy=TOKENS_POLICY)
    assert [len(d.snapshots) for d in decisions] == [0, 0, 1]
    (snap,) = snapshots
    assert [t.turn_id for t in snap.turns] == [t.event_id for t in sent[:2]]
    assert (snap.reason, snap.occurred_at) == ("tokens", at(2))
    assert [t.turn_id for t in window.turns] == [sent[2].event_id]
    assert window.pending_tokens == 14


def test_a_window_that_reaches_max_tokens_exactly_is_promoted_with_its_last_turn() -> None:
    _, snapshots, decisions = feed([said(16), said(16)], policy=TOKENS_POLICY)  # 20 + 20 = 40
    assert [len(d.snapshots) for d in decisions] == [0, 1]
    assert [(s.reason, len(s.turns)) for s in snapshots] == [("tokens", 2)]


def test_a_single_turn_over_max_tokens_is_a_snapshot_of_its_own() -> None:
    sent = [said(5), said(100), said(5)]
    window, snapshots, _ = feed(sent, policy=TOKENS_POLICY)
    assert [[t.turn_id for t in s.turns] for s in snapshots] == [
        [sent[0].event_id],
        [sent[1].event_id],
    ]
    assert [s.reason for s in snapshots] == ["tokens", "tokens"]
    assert [t.turn_id for t in window.turns] == [sent[2].event_id]


def test_count_is_the_reason_when_both_budgets_fill_with_the_same_turn() -> None:
    policy = WindowPolicy(max_messages=2, idle_timeout=timedelta(seconds=60), max_tokens=40)
    _, (snap,), _ = feed([said(16), said(16)], policy=policy)
    assert snap.reason == "count"


def test_without_max_tokens_the_window_promotes_by_count_alone() -> None:
    policy = WindowPolicy(max_messages=3, idle_timeout=timedelta(seconds=60))
    _, snapshots, _ = feed([said(5_000) for _ in range(3)], policy=policy)
    assert [(s.reason, len(s.turns)) for s in snapshots] == [("count", 3)]


def test_a_token_budget_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        WindowPolicy(max_messages=3, idle_timeout=timedelta(seconds=1), max_tokens=0)


def test_forgetting_a_session_drops_its_pending_tokens() -> None:
    window, _, _ = feed([said(10)], policy=TOKENS_POLICY)
    assert forgotten_turns(window).pending_tokens == 0


def test_a_window_stored_before_pending_tokens_counts_them_from_its_turns() -> None:
    window, _, _ = feed([said(10), said(3)], policy=TOKENS_POLICY)
    stored = orjson.loads(window.model_dump_json(exclude={"pending_tokens"}))
    assert SessionWindow.model_validate(stored).pending_tokens == 14 + 7


# --- topic shift ----------------------------------------------------------------------------------

SHIFT_POLICY = WindowPolicy(
    max_messages=100,
    idle_timeout=timedelta(seconds=60),
    topic_shift=TopicShiftPolicy(threshold=0.5, min_turns=2),
)
TENNIS, PASTA = TurnVector("m", (1.0, 0.0)), TurnVector("m", (0.0, 1.0))


def feed_with_vectors(
    sent: Sequence[tuple[TurnRecorded, TurnVector | None]], policy: WindowPolicy = SHIFT_POLICY
) -> tuple[SessionWindow, list[SnapshotPromoted]]:
    window: SessionWindow | None = None
    snapshots: list[SnapshotPromoted] = []
    for offset, (command, vector) in enumerate(sent):
        decision = decide(window, command, offset=offset, policy=policy, vector=vector)
        window = decision.window
        snapshots.extend(decision.snapshots)
    assert window is not None
    return window, snapshots


def test_a_turn_off_the_windows_topic_promotes_the_pending_turns_first() -> None:
    sent = [(recorded(0), TENNIS), (recorded(1), TENNIS), (recorded(2), PASTA)]
    window, (snap,) = feed_with_vectors(sent)
    assert (snap.reason, snap.occurred_at) == ("topic_shift", at(2))
    assert [t.turn_id for t in snap.turns] == [sent[0][0].event_id, sent[1][0].event_id]
    assert [t.turn_id for t in window.turns] == [sent[2][0].event_id]
    assert (window.topic, window.topic_model, window.topic_turns) == ((0.0, 1.0), "m", 1)


def test_a_window_below_min_turns_has_no_topic_to_leave() -> None:
    _, snapshots = feed_with_vectors([(recorded(0), TENNIS), (recorded(1), PASTA)])
    assert snapshots == []


def test_turns_without_a_vector_neither_shift_nor_count_toward_the_topic() -> None:
    sent = [(recorded(0), TENNIS), (recorded(1), None), (recorded(2), PASTA)]
    window, snapshots = feed_with_vectors(sent)
    assert snapshots == [] and window.topic_turns == 2


def test_without_the_trigger_vectors_change_no_promotion() -> None:
    sent = [(recorded(i), vector) for i, vector in enumerate([TENNIS, TENNIS, PASTA])]
    _, snapshots = feed_with_vectors(sent, policy=TOKENS_POLICY)
    assert snapshots == []


def test_every_promotion_and_forgetting_clears_the_topic() -> None:
    window, _ = feed_with_vectors([(recorded(0), TENNIS), (recorded(1), TENNIS)])
    flushed = decide(window, flush(occurred_at=at(5)), offset=9, policy=SHIFT_POLICY).window
    for cleared in (flushed, forgotten_turns(window)):
        assert (cleared.topic, cleared.topic_model, cleared.topic_turns) == ((), None, 0)


# --- flush ----------------------------------------------------------------------------------------


def test_flush_promotes_pending_turns_at_the_flush_time() -> None:
    sent = turns(2)
    window, snapshots, decisions = feed([*sent, flush(occurred_at=at(42))])
    (snap,) = snapshots
    assert decisions[-1].snapshots == (snap,)
    assert (snap.reason, snap.seq, snap.occurred_at) == ("flush", 0, at(42))
    assert [t.turn_id for t in snap.turns] == [t.event_id for t in sent]
    assert window.turns == ()
    assert window.seq == 1


@pytest.mark.parametrize("history", [[], turns(3)], ids=["fresh", "just-promoted"])
def test_flush_on_an_empty_window_is_ignored(history: list[TurnRecorded]) -> None:
    _, snapshots, decisions = feed([*history, flush()])
    assert decisions[-1].snapshots == ()
    assert decisions[-1].ignored == "nothing pending"
    assert len(snapshots) == (1 if history else 0)


def test_flush_of_a_new_session_opens_its_window() -> None:
    decision = decide(None, flush(user_id="u9", session_id="s9"), offset=4, policy=POLICY)
    assert (decision.window.user_id, decision.window.session_id) == ("u9", "s9")


# --- idle: judged in event time -------------------------------------------------------------------


def _pending_window() -> SessionWindow:
    window, _, _ = feed([recorded(0), recorded(0)])
    return window


@pytest.mark.parametrize(
    ("elapsed", "promoted"),
    [(0, False), (59.999, False), (60, True), (61, True), (3_600, True)],
)
def test_idle_command_promotes_only_if_the_session_was_idle_at_the_command_time(
    elapsed: float, promoted: bool
) -> None:
    window = _pending_window()
    decision = decide(window, idle(0, occurred_at=at(elapsed)), offset=10, policy=POLICY)
    if promoted:
        (snap,) = decision.snapshots
        assert (snap.reason, snap.seq, snap.occurred_at) == ("idle", 0, at(elapsed))
        assert len(snap.turns) == 2
        assert decision.window.turns == ()
        assert decision.window.seq == 1
    else:
        assert decision.snapshots == ()
        assert decision.ignored == f"session was not idle at {at(elapsed)}"


def test_idle_is_measured_from_the_latest_recording_time() -> None:
    window, _, _ = feed([recorded(0), recorded(50)])
    assert decide(window, idle(0, occurred_at=at(70)), offset=2, policy=POLICY).ignored
    assert decide(window, idle(0, occurred_at=at(110)), offset=2, policy=POLICY).snapshots


def test_a_backfilled_conversation_is_not_idle_because_it_happened_long_ago() -> None:
    # Imported turns said a year ago but recorded just now: activity is the recording time.
    backfill = [recorded(0, occurred_at=CLOCK - timedelta(days=365)) for _ in range(2)]
    window, _, _ = feed(backfill)
    assert decide(window, idle(0, occurred_at=at(30)), offset=2, policy=POLICY).ignored


def test_the_same_idle_command_decides_the_same_whenever_it_is_processed() -> None:
    """The bug this replaces: idleness judged by the processing time made a replayed idle
    command 'not idle' and let later turns join the window."""
    window = _pending_window()
    command = idle(0, occurred_at=at(60))
    results = {decide(window, command, offset=5, policy=POLICY).snapshots for _ in range(3)}
    assert len(results) == 1


@pytest.mark.parametrize("window_seq", [1, 2, 7])
def test_idle_command_for_another_window_is_ignored(window_seq: int) -> None:
    decision = decide(
        _pending_window(), idle(window_seq, occurred_at=at(600)), offset=10, policy=POLICY
    )
    assert decision.snapshots == ()
    assert decision.ignored == f"stale idle command for window {window_seq}"


def test_stale_idle_command_after_a_count_promotion_is_ignored() -> None:
    window = _pending_window()
    command = idle_command(window, at(60))  # the timer fires for window 0 ...
    window, (snap,), _ = feed([recorded(61)], window=window, start_offset=2)  # ... count wins
    assert snap.seq == 0
    window, _, _ = feed([recorded(62)], window=window, start_offset=3)
    decision = decide(window, command, offset=4, policy=POLICY)
    assert decision.snapshots == ()
    assert decision.ignored is not None and "stale" in decision.ignored
    assert len(decision.window.turns) == 1


def test_a_turn_recorded_after_the_idle_command_keeps_the_session_open() -> None:
    roomy = WindowPolicy(max_messages=10, idle_timeout=timedelta(seconds=60))
    window, _, _ = feed([recorded(0)], policy=roomy)
    command = idle_command(window, at(60))
    window, _, _ = feed([recorded(59)], window=window, start_offset=1, policy=roomy)
    decision = decide(window, command, offset=2, policy=roomy)
    assert decision.snapshots == ()
    assert decision.ignored == f"session was not idle at {at(60)}"
    assert len(decision.window.turns) == 2


def test_idle_command_on_an_empty_window_is_ignored() -> None:
    window, _, _ = feed(turns(3))
    decision = decide(window, idle(1, occurred_at=at(600)), offset=3, policy=POLICY)
    assert decision.snapshots == ()
    assert decision.ignored is not None and "not idle" in decision.ignored


def test_is_idle() -> None:
    assert not is_idle(SessionWindow.opened("u1", "s1"), at(10_000), POLICY)
    window = _pending_window()
    assert not is_idle(window, at(59), POLICY)
    assert is_idle(window, at(60), POLICY)
    assert not is_idle(window.model_copy(update={"turns": ()}), at(600), POLICY)
    assert not is_idle(window.model_copy(update={"last_activity_at": None}), at(600), POLICY)


def test_idle_command_targets_the_current_window_at_the_timer_time() -> None:
    window, _, _ = feed(turns(4))
    command = idle_command(window, at(90))
    assert isinstance(command, SessionIdled)
    assert (command.user_id, command.session_id, command.window_seq) == ("u1", "s1", 1)
    assert command.occurred_at == at(90)
    assert command.key == "u1|s1"
    assert command.event_id == derived_id("idle", "u1", "s1", 1, at(90).isoformat())
    assert idle_command(window, at(95)).event_id != command.event_id  # another time, another id


def test_the_timer_requests_an_idle_window_once_per_timeout() -> None:
    window = _pending_window()
    assert not should_request_idle(window, at(59), POLICY, None)
    assert should_request_idle(window, at(60), POLICY, None)
    asked = IdleRequest(window_seq=0, at=at(60))
    assert not should_request_idle(window, at(100), POLICY, asked)  # still on its way
    assert should_request_idle(window, at(120), POLICY, asked)  # lost? ask again
    moved_on = window.model_copy(update={"seq": 1})
    assert should_request_idle(moved_on, at(61), POLICY, asked)  # another window


# --- bounded state: quiet windows are retired ----------------------------------------------------

HORIZON = WindowPolicy(
    max_messages=3, idle_timeout=timedelta(seconds=60), dedup_horizon=timedelta(seconds=600)
)


def test_a_window_with_nothing_pending_is_retired_a_dedup_horizon_after_its_last_turn() -> None:
    window, _, _ = feed([recorded(0), recorded(5), recorded(10)], policy=HORIZON)  # promoted
    assert window.turns == () and window.latest_input_at == at(10)
    early = decide(window, idle(1, occurred_at=at(609)), offset=3, policy=HORIZON)
    assert not early.retired and early.ignored
    late = decide(window, idle(1, occurred_at=at(610)), offset=3, policy=HORIZON)
    assert late.retired and late.snapshots == () and late.ignored is None


def test_a_window_with_pending_turns_is_promoted_by_idleness_never_retired() -> None:
    window, _, _ = feed([recorded(0)], policy=HORIZON)
    decision = decide(window, idle(0, occurred_at=at(10_000)), offset=1, policy=HORIZON)
    assert not decision.retired
    assert [s.reason for s in decision.snapshots] == ["idle"]


def test_a_turn_resent_within_the_horizon_after_its_promotion_is_recognised() -> None:
    first = recorded(0)
    window, _, _ = feed([first, recorded(1), recorded(2)], policy=HORIZON)
    again = decide(window, first, offset=3, policy=HORIZON)
    assert again.ignored == f"turn {first.event_id} was already recorded"


def test_a_forgotten_session_is_retired_a_horizon_after_the_request() -> None:
    window, _, _ = feed([recorded(0)], policy=HORIZON)
    forgotten = decide(window, f.session_forgotten(occurred_at=at(100)), offset=1, policy=HORIZON)
    assert forgotten.window.latest_input_at == at(100)
    assert not is_retired(forgotten.window, at(699), HORIZON)
    assert is_retired(forgotten.window, at(700), HORIZON)


def test_a_window_stored_before_the_horizon_existed_is_retired_when_quiet() -> None:
    old = SessionWindow.opened("u1", "s1").model_copy(update={"seq": 3})
    assert is_retired(old, at(0), HORIZON)


def test_the_timer_asks_to_retire_a_quiet_window_with_nothing_pending() -> None:
    window, _, _ = feed([recorded(0), recorded(1), recorded(2)], policy=HORIZON)
    assert not should_request_idle(window, at(601), HORIZON, None)
    assert should_request_idle(window, at(602), HORIZON, None)
    asked = IdleRequest(window_seq=window.seq, at=at(602))
    assert not should_request_idle(window, at(630), HORIZON, asked)  # still on its way


# --- duplicates and collisions --------------------------------------------------------------------


def test_redelivered_offset_is_ignored() -> None:
    first = turn()
    window, _, _ = feed([first, turn()])
    decision = decide(window, first, offset=0, policy=POLICY)
    assert decision.ignored == "offset 0 already applied"
    assert decision.snapshots == ()


def test_a_turn_sent_twice_is_pending_once() -> None:
    once = turn()
    window, _, decisions = feed([once, once])
    assert decisions[1].ignored == f"turn {once.event_id} was already recorded"
    assert [t.turn_id for t in window.turns] == [once.event_id]


def test_a_turn_resent_after_its_promotion_is_not_promoted_again() -> None:
    sent = turns(3)
    window, snapshots, _ = feed([*sent, sent[2], sent[0], turn(), turn(), turn()])
    promoted = [t.turn_id for s in snapshots for t in s.turns]
    assert len(promoted) == len(set(promoted)) == 6
    assert window.turns == ()


def test_a_resent_turn_with_a_new_recording_time_is_still_the_same_turn() -> None:
    once = recorded(0)
    again = once.model_copy(update={"recorded_at": at(30)})
    assert turn_fingerprint(once) == turn_fingerprint(again)
    _, _, decisions = feed([once, again])
    assert decisions[1].ignored is not None


def test_the_same_turn_id_with_other_content_is_a_collision() -> None:
    first = turn(content="I live in Lisbon.")
    other = turn(event_id=first.event_id, content="I live in Porto.")
    window, _, decisions = feed([first, other])
    assert decisions[1].rejected == (
        f"turn id collision: {first.event_id} was recorded before with other content"
    )
    assert [t.content for t in window.turns] == ["I live in Lisbon."]


def test_the_window_remembers_a_bounded_number_of_turn_ids() -> None:
    policy = WindowPolicy(max_messages=5, idle_timeout=timedelta(seconds=60))
    window, _, _ = feed(turns(RECENT_TURNS_REMEMBERED + 30), policy=policy)
    assert len(window.recent) == RECENT_TURNS_REMEMBERED


# --- ids ------------------------------------------------------------------------------------------


def test_a_crash_before_storing_the_window_repeats_the_same_snapshot() -> None:
    sent = turns(3)
    before, _, _ = feed(sent[:2])
    first = decide(before, sent[2], offset=2, policy=POLICY)
    second = decide(before, sent[2], offset=2, policy=POLICY)  # the window was not stored
    assert first.snapshots and first.snapshots == second.snapshots
    assert first.window == second.window


def test_a_lost_log_and_a_reused_session_id_never_repeat_a_snapshot_id() -> None:
    _, (first_life,), _ = feed(turns(3))
    _, (second_life,), _ = feed(turns(3))  # a fresh window: seq restarts at 0
    assert first_life.seq == second_life.seq == 0
    assert first_life.event_id != second_life.event_id


def test_sessions_have_distinct_snapshot_ids() -> None:
    _, (a,), _ = feed(turns(3, session_id="a"))
    _, (b,), _ = feed(turns(3, session_id="b"))
    _, (c,), _ = feed(turns(3, user_id="other", session_id="a"))
    assert len({a.event_id, b.event_id, c.event_id}) == 3
    assert c.key == "other"


def test_a_window_stored_by_release_0_1_is_read_in_event_time() -> None:
    stored = {
        "user_id": "u1",
        "session_id": "s1",
        "seq": 2,
        "turns": [
            {
                "turn_id": "t1",
                "role": "user",
                "content": "hi",
                "occurred_at": "2026-01-31T12:00:00Z",
            }
        ],
        "last_offset": 7,
        "last_turn_at": "2026-06-01T00:00:00Z",  # the processing time 0.1 kept
    }
    window = SessionWindow.model_validate_json(orjson.dumps(stored))
    assert window.last_activity_at == CLOCK
    assert window.seq == 2 and window.last_offset == 7


# --- property: a replay with another clock promotes the same snapshots ----------------------------


def _simulated_log(seed: int, timer_offset: timedelta) -> tuple[list[WindowInput], WindowPolicy]:
    """A random session as it reaches the turns topic: turns recorded by a producer, flushes,
    and the idle commands a timer running on a clock shifted by `timer_offset` writes while the
    window processes the log (each command appended after what was already in the log)."""
    rng = random.Random(seed)
    policy = WindowPolicy(
        max_messages=rng.randint(1, 6),
        idle_timeout=timedelta(seconds=rng.choice([5, 30, 60])),
        max_tokens=rng.choice([None, 15, 40]),
    )
    log: list[WindowInput] = []
    window: SessionWindow | None = None
    requested: IdleRequest | None = None
    wall = CLOCK
    for offset in range(rng.randint(20, 80)):
        wall += timedelta(seconds=rng.choice([0, 1, 3, 10, 45, 120]))
        command: WindowInput
        if rng.random() < 0.85:
            content = f"m{offset}" + " word" * rng.randint(0, 12)
            command = turn(content=content, recorded_at=wall, occurred_at=wall)
        else:
            command = flush(occurred_at=wall)
        log.append(command)
        window = decide(window, command, offset=len(log) - 1, policy=policy).window
        timer_now = wall + timer_offset
        if should_request_idle(window, timer_now, policy, requested):
            requested = IdleRequest(window.seq, timer_now)
            log.append(idle_command(window, timer_now))
            window = decide(window, log[-1], offset=len(log) - 1, policy=policy).window
    return log, policy


def _replay(
    log: Sequence[WindowInput],
    policy: WindowPolicy,
    start: int = 0,
    window: SessionWindow | None = None,
) -> tuple[SessionWindow | None, list[SnapshotPromoted]]:
    snapshots: list[SnapshotPromoted] = []
    for offset, command in enumerate(log[start:], start=start):
        decision = decide(window, command, offset=offset, policy=policy)
        if not decision.ignored and not decision.rejected:
            window = decision.window
        snapshots.extend(decision.snapshots)
    return window, snapshots


SEEDS = list(range(12))


@pytest.mark.parametrize("seed", SEEDS)
def test_replaying_the_log_with_another_clock_promotes_the_same_snapshots(seed: int) -> None:
    log, policy = _simulated_log(seed, timer_offset=timedelta(0))
    _, first_run = _replay(log, policy)
    # The replay's own timer runs a day ahead: everything it writes lands after the copied log
    # and finds every window it asks about already decided by the commands in the log.
    replay_timer = log[-1].occurred_at + timedelta(days=1)
    final, replayed = _replay(log, policy)
    assert final is not None
    late = idle_command(final, replay_timer)
    _, after = _replay([*log, late], policy, start=len(log), window=final)
    assert replayed == first_run
    assert [s.event_id for s in first_run] == [s.event_id for s in replayed]
    assert all(s.reason == "idle" for s in after)  # only a still-pending tail can close late


@pytest.mark.parametrize("seed", SEEDS)
def test_every_turn_lands_in_exactly_one_place(seed: int) -> None:
    log, policy = _simulated_log(seed, timer_offset=timedelta(seconds=seed % 3))
    window, snapshots = _replay(log, policy)
    assert window is not None
    sent = [c.event_id for c in log if isinstance(c, TurnRecorded)]
    placed = [t.turn_id for s in snapshots for t in s.turns] + [t.turn_id for t in window.turns]
    assert placed == sent  # each once, in order
    assert [s.seq for s in snapshots] == list(range(len(snapshots)))
    assert all(1 <= len(s.turns) <= policy.max_messages for s in snapshots)
    assert all(len(s.turns) == policy.max_messages for s in snapshots if s.reason == "count")
    if policy.max_tokens is not None:  # only a turn over the budget alone may pass it
        tokens = [sum(map(turn_tokens, s.turns)) for s in snapshots if len(s.turns) > 1]
        assert all(t <= policy.max_tokens for t in tokens)
    assert len({s.event_id for s in snapshots}) == len(snapshots)


@pytest.mark.parametrize("seed", SEEDS)
def test_restart_from_an_older_offset_gives_the_same_result(seed: int) -> None:
    """A worker stored its window after input k but committed only offset j <= k + 1."""
    log, policy = _simulated_log(seed, timer_offset=timedelta(0))
    final, snapshots = _replay(log, policy)
    rng = random.Random(seed + 1000)
    for _ in range(5):
        stored_after = rng.randint(0, len(log) - 1)
        stored, before = _replay(log[: stored_after + 1], policy)
        committed = rng.randint(0, stored_after + 1)
        window, after = _replay(log, policy, start=committed, window=stored)
        assert window == final
        assert before + after == snapshots


# --- limits -----------------------------------------------------------------------------------


def test_a_turn_over_the_turn_limit_is_rejected_and_the_window_goes_on() -> None:
    policy = WindowPolicy(max_messages=2, idle_timeout=timedelta(seconds=60), max_turn_chars=10)
    long, short = turn(content="x" * 11), turn(content="short")
    _, snapshots, decisions = feed([long, short, turn(content="ok")], policy=policy)
    assert decisions[0].rejected is not None
    assert "turn too large" in decisions[0].rejected and "11 characters" in decisions[0].rejected
    (snap,) = snapshots
    assert long.event_id not in snap.turn_ids and short.event_id in snap.turn_ids


def test_a_single_turn_larger_than_a_snapshot_may_be_is_rejected() -> None:
    policy = WindowPolicy(
        max_messages=5, idle_timeout=timedelta(seconds=60), max_snapshot_bytes=10_000
    )
    pending = turn(content="before")
    huge = turn(content="y" * 20_000)
    window, snapshots, decisions = feed([pending, huge], policy=policy)
    assert decisions[1].rejected is not None
    assert "turn too large for a snapshot" in decisions[1].rejected
    assert "max_snapshot_bytes (10000)" in decisions[1].rejected
    assert snapshots == []  # the pending turn is not promoted early on the rejected one's account
    assert [t.turn_id for t in window.turns] == [pending.event_id]


# -- forgetting --------------------------------------------------------------------------------


def test_a_session_forget_drops_the_open_turns_and_says_so_after_earlier_snapshots() -> None:
    window, snapshots, _ = feed(turns(4))  # one snapshot of 3, one turn open
    request = f.session_forgotten()
    decision = decide(window, request, offset=10, policy=POLICY, partition=2)
    assert decision.window.turns == () and decision.window.pending_bytes == 0
    assert decision.window.seq == window.seq  # numbering goes on for a reused session id
    assert decision.snapshots == ()
    fact = decision.forgotten
    assert fact is not None
    assert (fact.request_id, fact.session_ids, fact.turns_partition) == (
        request.event_id,
        ("s1",),
        2,
    )
    assert len(snapshots) == 1


def test_a_forgotten_turn_sent_again_is_not_recorded_again() -> None:
    sent = turns(2)
    window, _, _ = feed(sent)
    forgotten = decide(window, f.session_forgotten(), offset=5, policy=POLICY).window
    retry = decide(forgotten, sent[0], offset=6, policy=POLICY)
    assert retry.ignored and "already recorded" in retry.ignored


def test_a_session_forget_of_an_unknown_session_still_says_so() -> None:
    decision = decide(None, f.session_forgotten(session_id="new"), offset=0, policy=POLICY)
    assert decision.forgotten is not None and decision.forgotten.session_ids == ("new",)


def test_a_user_forget_drops_the_users_windows_of_its_partition_only() -> None:
    def open_window(user: str, session: str, partition: int | None) -> SessionWindow:
        window, _, _ = feed(turns(1, user_id=user, session_id=session))
        return window.model_copy(update={"partition": partition})

    windows = [
        open_window("u1", "a", 0),
        open_window("u1", "b", 1),
        open_window("u1", "old", None),  # stored before windows knew their partition
        open_window("u2", "c", 0),
    ]
    request = f.user_forgotten(turns_partition=0)
    cleared, fact = forget_user_windows(windows, request, 0)
    assert [w.session_id for w in cleared] == ["a", "old"]
    assert all(w.turns == () for w in cleared)
    assert fact.session_ids == ("a", "old") and fact.scope == "user"
    assert fact.event_id != forget_user_windows(windows, request, 1)[1].event_id


def test_the_window_remembers_the_partition_its_records_arrive_on() -> None:
    decision = decide(None, turn(), offset=0, policy=POLICY, partition=3)
    assert decision.window.partition == 3
