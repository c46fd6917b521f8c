"""A shadow's selection: some users' snapshots, since a time; forgetting never left out."""

from __future__ import annotations

from datetime import timedelta

from handlers.selection import EVERYTHING, Selection
from tests import factories as f


def test_everything_is_taken_by_default() -> None:
    assert EVERYTHING.takes(f.snapshot())


def test_only_the_named_users_snapshots_are_taken() -> None:
    chosen = Selection(users=frozenset({f.USER_ID}))
    assert chosen.takes(f.snapshot())
    assert not chosen.takes(f.snapshot(user_id="someone-else"))


def test_a_snapshot_before_since_is_left_out() -> None:
    snapshot = f.snapshot()
    assert Selection(since=snapshot.occurred_at).takes(snapshot)
    assert not Selection(since=snapshot.occurred_at + timedelta(seconds=1)).takes(snapshot)


def test_forgetting_is_taken_whatever_the_selection() -> None:
    forget = f.user_forgotten(user_id="someone-else")
    chosen = Selection(users=frozenset({f.USER_ID}), since=f.CLOCK + timedelta(days=1))
    assert chosen.takes(forget)
