"""The stages' table keys: a session's window, a partition's progress, never confused."""

from __future__ import annotations

from faust.types import TP

from handlers.session_window import SessionWindow
from streams.table_keys import is_progress_key, is_window_of, progress_key, window_key


def window(user_id: str, session_id: str) -> SessionWindow:
    return SessionWindow.opened(user_id, session_id)


def test_progress_keys_never_look_like_session_keys() -> None:
    key = progress_key(TP("turns", 2))
    assert is_progress_key(key)
    assert not is_progress_key(window_key(window("ann", "s1")))


def test_a_window_key_is_the_sessions_kafka_key_and_belongs_to_its_user_only() -> None:
    key = window_key(window("ann", "s1"))
    assert key == b"ann|s1"
    assert is_window_of(key, "ann")
    assert not is_window_of(key, "an") and not is_window_of(key, "anne")
    assert not is_window_of(progress_key(TP("turns", 0)), "ann")
