"""Short-term memory: the turns of a session, and the commands that close its window.

All three events travel on the turns topic keyed by `session_key(user_id, session_id)`, so a
session's turns and its close commands stay ordered in one partition.

The rules of who may speak (roles, speaker names) and how much one turn may say live here, once:
the SDK's message normalisation (`handlers.messages`) and the event validation share them.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from events.base import Event, Identifier, UtcDatetime

Role = Literal["user", "assistant", "system", "tool"]
ROLES: tuple[Role, ...] = get_args(Role)
MAX_CONTENT_CHARS = 32_000
"""The longest content one turn may carry (characters)."""
MAX_NAME_CHARS = 100
"""The longest speaker name (characters)."""
MAX_TOOL_NAME_CHARS = 200
"""The longest tool name (characters)."""
FORBIDDEN_NAME_CHARS = "[]:"
"""A name is rendered as ``[John]:``, so it may not contain these (nor line breaks)."""
NAME_PATTERN = rf"^[^{re.escape(FORBIDDEN_NAME_CHARS)}\n\r]+$"
"""`FORBIDDEN_NAME_CHARS` and line breaks as a JSON Schema pattern, for producers in other
languages; `speaker_name_problem` is the whole rule."""


def speaker_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a speaker's name, or ``None`` when it can.

    A name must be non-empty, printable on one line, free of ``[``, ``]`` and ``:`` (it is
    rendered as ``[John]:``) and must not be a role label (``user``, ``assistant``, ``system``,
    ``tool``, any case), which would read back as that role.
    """
    if not name.strip():
        return "name is empty"
    if len(name) > MAX_NAME_CHARS:
        return f"name is {len(name)} characters, over the limit of {MAX_NAME_CHARS}"
    if any(char in FORBIDDEN_NAME_CHARS for char in name):
        return f"name {name!r} contains one of '[', ']' or ':'"
    if not name.isprintable():
        return f"name {name!r} contains a line break or control character"
    if name.strip().casefold() in ROLES:
        return f"name {name!r} is a role label; use the role instead"
    return None


class Principal(BaseModel):
    """Who sent a turn: an end user, an application, or a deployed agent's service account."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["end_user", "application", "service_account"]
    id: Identifier


def session_key(user_id: str, session_id: str) -> str:
    """The Kafka key of a session: `user_id|session_id` (ids never contain `|`)."""
    return f"{user_id}|{session_id}"


class TurnRecorded(Event):
    """One message of a conversation, appended as it happened.

    `occurred_at` is when the message was said (a backfill may carry old times); `recorded_at` is
    when it was recorded, the time the session window judges idleness by.
    """

    event_type: Literal["TurnRecorded"] = "TurnRecorded"
    schema_version: Literal[1] = 1

    user_id: Identifier
    session_id: Identifier
    agent_id: Identifier | None = None
    role: Role
    name: str | None = Field(
        default=None, min_length=1, max_length=MAX_NAME_CHARS, pattern=NAME_PATTERN
    )
    tool_name: str | None = Field(default=None, max_length=MAX_TOOL_NAME_CHARS)
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    recorded_at: UtcDatetime
    principal: Principal | None = None

    @model_validator(mode="after")
    def _speaker_rules(self) -> TurnRecorded:
        if self.name is not None and (problem := speaker_name_problem(self.name)):
            raise ValueError(problem)
        if self.role == "tool" and self.name is not None:
            raise ValueError("a tool turn's name is the tool's name: send it as tool_name")
        if self.role != "tool" and self.tool_name is not None:
            raise ValueError("tool_name is only for role 'tool'")
        return self

    @property
    def key(self) -> str:
        return session_key(self.user_id, self.session_id)


class SessionFlushRequested(Event):
    """The application ended a session: promote whatever is pending now (reason `flush`)."""

    event_type: Literal["SessionFlushRequested"] = "SessionFlushRequested"
    schema_version: Literal[1] = 1

    user_id: Identifier
    session_id: Identifier

    @property
    def key(self) -> str:
        return session_key(self.user_id, self.session_id)


class SessionIdled(Event):
    """A worker's idle timer saw window `window_seq` of this session go quiet at `occurred_at`.

    Sent by the timer through the turns topic so the window is only changed by stream processing.
    The window promotes only if the session was idle as of `occurred_at` (event time, not the
    time the command is processed) and still on `window_seq`; otherwise the command is stale.
    """

    event_type: Literal["SessionIdled"] = "SessionIdled"
    schema_version: Literal[1] = 1

    user_id: Identifier
    session_id: Identifier
    window_seq: int = Field(ge=0)

    @property
    def key(self) -> str:
        return session_key(self.user_id, self.session_id)
