"""Short-term memory: the turns of a session, and the commands that close its window.

All three events travel on the turns topic keyed by `session_key(user_id, session_id)`, so a
session's turns and its close commands stay ordered in one partition.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from events.base import Event, Identifier, UtcDatetime

Role = Literal["user", "assistant", "system", "tool"]
ROLE_LABELS = ("user", "assistant", "system", "tool")
MAX_CONTENT_CHARS = 32_000


class Principal(BaseModel):
    """Who sent a turn: an end user, an application, or a deployed agent's service account."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["end_user", "application", "service_account"]
    id: Identifier


def session_key(user_id: str, session_id: str) -> str:
    """The Kafka key of a session: `user_id|session_id` (ids never contain `|`)."""
    return f"{user_id}|{session_id}"


class TurnRecorded(Event):
    """One message of a conversation, appended as it happened."""

    event_type: Literal["TurnRecorded"] = "TurnRecorded"
    schema_version: Literal[1] = 1

    user_id: Identifier
    session_id: Identifier
    agent_id: Identifier | None = None
    role: Role
    name: str | None = Field(default=None, min_length=1, max_length=100, pattern=r"^[^\[\]:\n\r]+$")
    tool_name: str | None = Field(default=None, max_length=200)
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    recorded_at: UtcDatetime
    principal: Principal | None = None

    @model_validator(mode="after")
    def _speaker_rules(self) -> TurnRecorded:
        if self.name is not None and self.name.strip().casefold() in ROLE_LABELS:
            raise ValueError(f"name {self.name!r} is a role label; use the role instead")
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
    """A worker's idle timer saw window `window_seq` of this session go quiet.

    Sent by the timer through the turns topic so the window is only changed by stream processing;
    stale commands (the window moved on) are ignored.
    """

    event_type: Literal["SessionIdled"] = "SessionIdled"
    schema_version: Literal[1] = 1

    user_id: Identifier
    session_id: Identifier
    window_seq: int = Field(ge=0)

    @property
    def key(self) -> str:
        return session_key(self.user_id, self.session_id)
