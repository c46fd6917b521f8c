"""The L0 profile: basic facts about the current user only (docs/architecture.md, "Read models").

Fed by the current user's semantic facts that carry a `profile_field`, and by the `name` of the
user's own turns (trusted input). Another person's job or city never enters it: only memories whose
subject is "the user" are applied. The newest observation of a field wins, so replays and
redeliveries in any order converge.
"""

from __future__ import annotations

from contextlib import suppress
from datetime import datetime

from pymongo.errors import DuplicateKeyError

from events.memories import USER_SUBJECT, MemoryAdded, MemoryUpdated
from events.turns import TurnRecorded
from projections.store import PROFILES, Db


def apply_profile_fact(db: Db, event: MemoryAdded | MemoryUpdated) -> None:
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


def apply_user_name(db: Db, turn: TurnRecorded) -> None:
    """A named `role=user` turn names the current user."""
    if turn.role == "user" and turn.name:
        _set_field(db, turn.user_id, "name", turn.name, turn.event_id, turn.occurred_at)


def _set_field(
    db: Db,
    user_id: str,
    field: str,
    value: str,
    event_id: str,
    at: datetime,
    memory_id: str | None = None,
) -> None:
    path = f"fields.{field}"
    entry = {"value": value, "event_id": event_id, "memory_id": memory_id, "at": at}
    # DuplicateKeyError: the profile exists and holds a newer (or the same) observation.
    with suppress(DuplicateKeyError):
        db[PROFILES].update_one(
            {
                "_id": user_id,
                "$or": [{path: {"$exists": False}}, {f"{path}.at": {"$lt": at}}],
            },
            # `$max`: projected in another order (turns and memories are separate topics), the
            # profile still ends with the same `updated_at`.
            {
                "$set": {path: entry},
                "$max": {"updated_at": at},
                "$setOnInsert": {"user_id": user_id},
            },
            upsert=True,
        )
