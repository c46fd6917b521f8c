"""The window benchmark's pure helpers: its workload, what it counts as promoted, its figures."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from aiokafka import ConsumerRecord

from bench.kafka_probe import Arrival, parse_cpu_seconds
from bench.suites.window import (
    cpu_per_thousand,
    per_second,
    promoted_turns,
    session_turns,
    stagger,
)
from events.codec import encode
from events.snapshots import SnapshotPromoted
from handlers.session_window import SessionWindow
from handlers.window import WindowPolicy, decide

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def test_session_turns_fill_every_session_and_keep_each_sessions_order() -> None:
    turns = session_turns(120, 20, NOW, concurrent=4)
    assert len(turns) == 120
    assert len({turn.event_id for turn in turns}) == 120
    by_session = Counter(turn.session_id for turn in turns)
    assert by_session == {f"s{i}": 20 for i in range(6)}
    first = [turn.event_id for turn in turns if turn.session_id == "s0"]
    assert first == [f"bench-0-{index}" for index in range(20)]


def test_session_turns_interleave_concurrent_sessions() -> None:
    turns = session_turns(60, 20, NOW, concurrent=2)
    assert [turn.session_id for turn in turns[:4]] == ["s0", "s1", "s0", "s1"]
    assert {turn.session_id for turn in turns[40:]} == {"s2"}  # the last group holds one session


def test_session_turns_refuse_a_partial_session() -> None:
    with pytest.raises(ValueError, match="sessions of 20"):
        session_turns(30, 20, NOW)


def test_every_benchmark_session_is_promoted_by_count_on_its_last_turn() -> None:
    policy = WindowPolicy(max_messages=20, idle_timeout=timedelta(minutes=5))
    windows: dict[str, SessionWindow | None] = {}
    promoted: list[SnapshotPromoted] = []
    for offset, turn in enumerate(session_turns(100, 20, NOW, concurrent=3)):
        decision = decide(windows.get(turn.key), turn, offset=offset, policy=policy)
        windows[turn.key] = decision.window
        promoted.extend(decision.snapshots)
    assert [len(snapshot.turns) for snapshot in promoted] == [20] * 5
    assert {snapshot.reason for snapshot in promoted} == {"count"}


def _arrival(value: bytes, offset: int = 0) -> Arrival:
    record = ConsumerRecord("snapshots", 0, offset, 0, 0, b"u1", value, None, 2, len(value), [])
    return Arrival(record, seen_at=float(offset))


def test_promoted_turns_are_the_turns_held_by_the_snapshots_received() -> None:
    turns = session_turns(40, 20, NOW)
    policy = WindowPolicy(max_messages=20, idle_timeout=timedelta(minutes=5))
    window = None
    snapshots = []
    for offset, turn in enumerate(t for t in turns if t.session_id == "s1"):
        decision = decide(window, turn, offset=offset, policy=policy)
        window = decision.window
        snapshots.extend(decision.snapshots)
    arrivals = [_arrival(encode(snapshot)) for snapshot in snapshots]
    assert promoted_turns(arrivals) == {f"bench-1-{index}" for index in range(20)}
    assert promoted_turns([]) == set()


def test_per_second_refuses_a_non_positive_duration() -> None:
    assert per_second(500, 2.0) == 250.0
    with pytest.raises(ValueError):
        per_second(500, 0.0)


def test_stagger_spreads_the_sessions_over_one_check_interval() -> None:
    assert stagger(4, 0.5) == [0.0, 0.125, 0.25, 0.375]
    assert stagger(1, 5.0) == [0.0]


def test_cpu_per_thousand_is_the_median_per_thousand_turns_or_none() -> None:
    rounds = [{"cpu_seconds": 2.0}, {"cpu_seconds": 4.0}, {"cpu_seconds": 3.0}]
    assert cpu_per_thousand(rounds, 500) == 6.0
    assert cpu_per_thousand([{"cpu_seconds": 2.0}, {"cpu_seconds": None}], 500) is None
    assert cpu_per_thousand([], 500) is None


def test_parse_cpu_seconds_adds_user_and_system_time_whatever_the_command_name() -> None:
    rest = "S 1 1 1 0 -1 4194304 99 0 0 0 250 50 7 9 20 0 1 0 4760591 3133440 381"
    assert parse_cpu_seconds(f"4242 (python) {rest}", 100) == 3.0
    assert parse_cpu_seconds(f"4242 (a (b) c) {rest}", 100) == 3.0
