"""The L0 profile: basic facts about the current user only (docs/architecture.md, "Read models").

Fed by the current user's semantic facts that carry a `profile_field`, and by the `name` of the
user's own turns (trusted input). Another person's job or city never enters it: only memories whose
subject is "the user" are applied. The newest observation of a field wins, so replays and
redeliveries in any order converge.
"""

from __future__ import annotations

from datetime import datetime

from events.memories import USER_SUBJECT, MemoryAdded, MemoryUpdated
from events.turns import TurnRecorded
from projections.store import PROFILES
from projections.writes import Writes


def apply_profile_fact(db: Writes, event: MemoryAdded | MemoryUpdated) -> None:
    """Set the profile field a current-user semantic fact names (if any)."""
    content = event.content
    field = content.attributes.get("profile_field")
    if event.memory_type != "semantic" or content.subject != USER_SUBJECT or not field:
        return
    _set_field(
        db,
        event.user_id,
        str(field),
        content.text,
        event.event_id,
        event.occurred_at,
        memory_id=event.memory_id,
    )


def apply_user_name(db: Writes, turn: TurnRecorded) -> None:
    """A named `role=user` turn names the current user."""
    if turn.role == "user" and turn.name:
        _set_field(db, turn.user_id, "name", turn.name, turn.event_id, turn.occurred_at)


def _set_field(
    db: Writes,
    user_id: str,
    field: str,
    value: str,
    event_id: str,
    at: datetime,
    memory_id: str | None = None,
) -> None:
    """Set the field unless it holds a newer observation (or this one): two writes that never
    conflict — create the profile if needed, then update the field on condition. `$max`: a
    profile projected in another order (turns and memories are separate topics) still ends
    with the same `updated_at`."""
    path = f"fields.{field}"
    entry = {"value": value, "event_id": event_id, "memory_id": memory_id, "at": at}
    db.update(PROFILES, {"_id": user_id}, {"$setOnInsert": {"user_id": user_id}}, upsert=True)
    db.update(
        PROFILES,
        {"_id": user_id, "$or": [{path: {"$exists": False}}, {f"{path}.at": {"$lt": at}}]},
        {"$set": {path: entry}, "$max": {"updated_at": at}},
    )
