"""Which data keys a forgetting record destroys (crypto-shredding, docs/architecture.md).

The projector destroys keys as it reads the records that erase the read model, in log order,
so a key dies only after the request that kills it is durable in the log:

* `SessionForgotten` (turns topic): the session's keys created until the request's time.
* `UserForgotten` (each turns-topic copy): every key of the user created until then.
* `MemoriesForgotten` (each stage's fact): each named memory's keys (whatever their age); for a
  session or a user request, the session's or the user's keys again, created until then.

Destroying again at the stages' facts matters: a stage still working on a forgotten session
when its key was first destroyed may have sealed something for it under a new generation (a
memory reinforced, a failure's details). Each stage writes its fact after every decision it
made about the request's data, so the second destroy catches what the first could not, and a
memory forgotten alone loses its key only once its stage can no longer decide about it.

`created_until` spares keys created after the request — a session id used again later — but
memory ids are never reused, so memory keys are destroyed whatever their age.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from events.forgetting import MemoriesForgotten, SessionForgotten, UserForgotten
from handlers.sealing import KeyScope


@dataclass(frozen=True)
class KeyErasure:
    """Destroy `owner`'s keys of `scope` (all scopes when None) for `subject` (all when None)
    created at or before `created_until` (whatever their age when None)."""

    owner: str
    scope: KeyScope | None
    subject: str | None
    created_until: datetime | None


@dataclass(frozen=True)
class KeysToDestroy:
    """The erasures one record asks for, and where its receipt counts them: the request's id
    and the step the record leaves on it (`projections.forgetting`)."""

    request_id: str
    step: str
    erasures: tuple[KeyErasure, ...]


def keys_to_destroy(
    event: SessionForgotten | UserForgotten | MemoriesForgotten,
) -> KeysToDestroy | None:
    """What `event` destroys; None for a record that destroys nothing (a `UserForgotten` on
    the snapshots topic: its turns-topic copies do)."""
    if isinstance(event, SessionForgotten):
        erasure = KeyErasure(event.user_id, "session", event.session_id, event.occurred_at)
        return KeysToDestroy(event.event_id, "turns", (erasure,))
    if isinstance(event, UserForgotten):
        if event.turns_partition is None:
            return None
        erasure = KeyErasure(event.user_id, None, None, event.occurred_at)
        return KeysToDestroy(event.event_id, f"turns-{event.turns_partition}", (erasure,))
    erasures = [KeyErasure(event.user_id, "memory", m, None) for m in event.memory_ids]
    if event.scope == "session":
        erasures += [
            KeyErasure(event.user_id, "session", s, event.occurred_at) for s in event.session_ids
        ]
    elif event.scope == "user":
        erasures.append(KeyErasure(event.user_id, None, None, event.occurred_at))
    return KeysToDestroy(event.request_id, f"memories-{event.event_id}", tuple(erasures))
