"""Destroying the data keys a forgetting record names, and counting them on its receipt
(`handlers.key_erasure` decides which; docs/architecture.md, "Crypto-shredding")."""

from __future__ import annotations

from events.forgetting import MemoriesForgotten, SessionForgotten, UserForgotten
from handlers.key_erasure import keys_to_destroy
from handlers.ports import DataKeys
from projections.forgetting import note_destroyed_keys
from projections.writes import Writes

KeyForgetting = SessionForgotten | UserForgotten | MemoriesForgotten


def destroy_forgotten_keys(store: DataKeys, db: Writes, event: KeyForgetting) -> int:
    """Destroy the keys `event` names; returns how many live keys this call destroyed (0 on a
    redelivery), which the receipt keeps as `keys_destroyed.<step>`."""
    plan = keys_to_destroy(event)
    if plan is None:
        return 0
    destroyed: set[str] = set()
    for erasure in plan.erasures:
        destroyed.update(
            store.destroy(
                erasure.owner,
                erasure.scope,
                erasure.subject,
                created_until=erasure.created_until,
            )
        )
    if destroyed:
        note_destroyed_keys(db, plan, event, len(destroyed))
    return len(destroyed)
