"""Forgetting: what a user asked to forget, and what each stage forgot because of it.

Three requests, each with who asked (`requested_by`) and why (`reason`), written by the SDK, the
CLI or the HTTP API (docs/architecture.md, "Forgetting"):

* `MemoryForgotten` — one memory, all its versions; on the snapshots topic keyed by user, so the
  stage of its memory type reads it in order with the user's snapshots and saves.
* `SessionForgotten` — a session's turns, snapshots and the memories it contributed a version
  to; on the turns topic keyed by the session, so the window reads it after the session's turns.
* `UserForgotten` — everything of a user; one copy on every turns-topic partition (each window
  partition forgets the user's sessions it holds) and one on the snapshots topic (the user's
  direct saves).

Two facts the stages write on the way:

* `SessionsForgotten` — a window partition dropped the open turns of these sessions; on the
  snapshots topic after every snapshot it promoted from them, so a memory type's stage reads it
  after everything those sessions contributed.
* `MemoriesForgotten` — a memory type's stage erased these memories from what it reconciles
  against; on the memories topic after every decision it made about them, so the projector
  erases them from the read model after it applied everything they were.

None of these events carries forgotten content: they are the audit trail an erasure leaves.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from events.base import Event, Identifier, UtcDatetime
from events.memories import MemoryType
from events.turns import session_key

ForgetScope = Literal["memory", "session", "user", "expiry"]
MAX_REASON_CHARS = 1_000


class _ForgetRequest(Event):
    user_id: Identifier
    requested_by: str = Field(min_length=1, max_length=200)
    """Who asked: an API key's principal (`service_account:…`), an operator (`cli:alice`) …"""
    reason: str = Field(default="", max_length=MAX_REASON_CHARS)


class MemoryForgotten(_ForgetRequest):
    """Forget one memory (every version of it), of `memory_type`, of `user_id`."""

    event_type: Literal["MemoryForgotten"] = "MemoryForgotten"
    schema_version: Literal[1] = 1

    memory_id: str = Field(min_length=1, max_length=200)
    memory_type: MemoryType

    @property
    def key(self) -> str:
        return self.user_id


class SessionForgotten(_ForgetRequest):
    """Forget a session: its turns (open or promoted), its snapshots, and every memory it
    contributed a version to; its reinforcements of other memories lose their evidence."""

    event_type: Literal["SessionForgotten"] = "SessionForgotten"
    schema_version: Literal[1] = 1

    session_id: Identifier

    @property
    def key(self) -> str:
        return session_key(self.user_id, self.session_id)


class UserForgotten(_ForgetRequest):
    """Forget everything of a user: turns, snapshots, memories, saves, profile.

    `turns_partition` is the turns-topic partition this copy was written to (None: the copy on
    the snapshots topic, which covers the user's direct saves)."""

    event_type: Literal["UserForgotten"] = "UserForgotten"
    schema_version: Literal[1] = 1

    turns_partition: int | None = Field(default=None, ge=0)

    @property
    def key(self) -> str:
        return self.user_id


class MemoryExpired(Event):
    """A memory type's stage saw the current version of a memory reach its `expires_at`.

    Written by the stage's expiry timer (the wall clock only triggers it) to the snapshots
    topic, keyed by user; the stage acts on it when it reads it back, if that version is still
    the current one and still expires then. `event_id` derives from the memory and its expiry;
    `occurred_at` is `expires_at`."""

    event_type: Literal["MemoryExpired"] = "MemoryExpired"
    schema_version: Literal[1] = 1

    user_id: Identifier
    memory_id: str = Field(min_length=1, max_length=200)
    memory_type: MemoryType
    expires_at: UtcDatetime

    @property
    def key(self) -> str:
        return self.user_id


class SessionsForgotten(Event):
    """A window partition dropped the open turns of `session_ids` for request `request_id`.

    `event_id` derives from the request and the partition; `occurred_at` is the request's."""

    event_type: Literal["SessionsForgotten"] = "SessionsForgotten"
    schema_version: Literal[1] = 1

    request_id: str = Field(min_length=1, max_length=200)
    scope: Literal["session", "user"]
    user_id: Identifier
    session_ids: tuple[Identifier, ...] = ()
    turns_partition: int = Field(ge=0)

    @property
    def key(self) -> str:
        return self.user_id


class MemoriesForgotten(Event):
    """A memory type's stage erased `memory_ids` for request `request_id`.

    `session_ids` are the forgotten sessions (their reinforcements of memories that stay lose
    their evidence); `saves` is True when the request covers the user's direct saves."""

    event_type: Literal["MemoriesForgotten"] = "MemoriesForgotten"
    schema_version: Literal[1] = 1

    request_id: str = Field(min_length=1, max_length=200)
    scope: ForgetScope
    user_id: Identifier
    memory_type: MemoryType
    memory_ids: tuple[str, ...] = ()
    session_ids: tuple[Identifier, ...] = ()
    saves: bool = False

    @property
    def key(self) -> str:
        return self.user_id


ForgetRequest = MemoryForgotten | SessionForgotten | UserForgotten
