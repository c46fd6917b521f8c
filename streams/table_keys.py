"""The keys of the stages' Faust tables, in one place (docs/architecture.md, "Stages").

A stage's table holds two kinds of entry:

* **a session's open window** (the window stage's `session-windows`), under the session's Kafka
  key `user_id|session_id` (`events.turns.session_key`): the key its turns carry, so an entry
  lives in the changelog partition of the turns partition it came from;
* **the last applied offset of an input partition** (every stage), under
  `\\x00applied|<topic>|<partition>`. Identifiers exclude NUL (`events.base`), so a progress
  key is never a session's.

A memory type's stage (`progress`) and the projector (`applied-offsets`, its progress before it
moved into the read model) hold progress only.
"""

from __future__ import annotations

from faust.types import TP

from events.turns import session_key
from handlers.session_window import SessionWindow

PROGRESS_KEY_PREFIX = b"\x00applied|"


def window_key(window: SessionWindow) -> bytes:
    """The table key of a session's open window."""
    return session_key(window.user_id, window.session_id).encode()


def is_window_of(key: bytes, user_id: str) -> bool:
    """Whether a table key is one of `user_id`'s sessions' windows."""
    return key.startswith(f"{user_id}|".encode()) and not is_progress_key(key)


def progress_key(tp: TP) -> bytes:
    """The table key under which a stage keeps the last applied offset of input partition `tp`."""
    return PROGRESS_KEY_PREFIX + f"{tp.topic}|{tp.partition}".encode()


def is_progress_key(key: bytes) -> bool:
    return key.startswith(PROGRESS_KEY_PREFIX)
