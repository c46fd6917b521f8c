"""Forgetting in the read model: erasing what a request names, and the receipt it leaves.

**Why no tombstones.** Each read model is erased by a record of the topic that feeds it, placed
in the same partition after everything it erases (docs/architecture.md, "Forgetting"): `turns`
by the turns-topic request, `snapshots` by `SessionsForgotten` (the window wrote it after
promoting every snapshot of those sessions), `memories`, `memory_events` and `saves` by each
memory type's `MemoriesForgotten` (its stage wrote it after every decision it made about them).
So when the projector reads the erasing record, everything it erases is already projected, and
anything read later is new data that stays. A replay reads each partition in log order too.

| record | topic | erases | receipt step |
| --- | --- | --- | --- |
| `MemoryForgotten` | snapshots | nothing (the stage answers) | — |
| `SessionForgotten` | turns | the session's turns | `turns` |
| `UserForgotten` (`turns_partition` p) | turns | the user's turns read from p | `turns-<p>` |
| `UserForgotten` (no partition) | snapshots | nothing (the stages answer) | — |
| `SessionsForgotten` | snapshots | the sessions' snapshots | `snapshots-<its id>` |
| `MemoriesForgotten` | memories | memories, their log and saves; evidence | `memories-<its id>` |

Decisions this module makes:

1. A turn projected before turns stored their partition has none, and every `UserForgotten`
   copy erases it: it was projected before any request existed, so it precedes every copy,
   and the first copy to arrive erases it.
2. A profile field set by an erased turn or memory is unset, not rolled back to an older
   observation: the next observation of the field sets it again. A profile left without fields
   is deleted, so nothing of a forgotten user remains in it.
3. Dependents first: profile fields and evidence are found through the turns and memory events
   that made them, so they are erased before those are. A crash half-way leaves the rest for
   the redelivery, which finds it the same way.
4. A reinforcement from a forgotten session leaves the memory it reinforced (no version came
   from the session) but loses its evidence entry, and `reinforcement_count` drops by one —
   entry by entry, each conditional on the entry still being there, so a redelivery lowers
   nothing twice. Attributes it merged and the `updated_at` it set stay.
5. Search forgets with the read model: each `MemoriesForgotten` delivery counts the memories it
   erased or unlinked in `memory_writes` (`projections.memories.count_changes`), every delivery
   like every memory event, so a crash before the count is repaired by the redelivery.
6. Receipts (`erasures`, one per request): the request's own fields are `$set` by the request's
   records — every copy carries the same values — and a stage's fact only `$setOnInsert`s its
   scope and user: topics are projected independently, so a fact may create the receipt before
   the request arrives, and a request's `$setOnInsert` would then never write who asked.
   Counts are `$max`ed, so a redelivery, which deletes nothing, never lowers them. A receipt
   holds ids and counts, never content.
7. An extraction result is on the memories topic, its snapshot on the snapshots topic, and the
   two are projected independently: when the result comes after the snapshot's erasure (a
   replay always reads the snapshots topic first), its claim starts a stub document
   (`extractions` only, with the user and session). The stage's `MemoriesForgotten` for those
   sessions comes after every result it wrote for them, so it erases the stubs, uncounted:
   the snapshot was counted where it was erased. Stubs projected before results named their
   user and session are not found.
8. A stage's fact touches only its own type's memories, evidence and log. The stages answer a
   request independently, and a stage finds the memories a session made through their
   evidence: had the first fact projected pulled every type's evidence of the session, a
   slower stage would then find nothing of it and keep the memories.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any, Literal

from events.forgetting import (
    MemoriesForgotten,
    MemoryExpired,
    MemoryForgotten,
    SessionForgotten,
    SessionsForgotten,
    UserForgotten,
)
from events.memories import MemoryType
from handlers.key_erasure import KeysToDestroy
from projections.memories import count_changes, version_id
from projections.store import (
    CONSOLIDATIONS,
    ERASURES,
    MEMORIES,
    MEMORY_EVENTS,
    PROFILES,
    ROLLBACKS,
    SAVES,
    SNAPSHOTS,
    TURNS,
)
from projections.writes import Writes

EXPIRY_REQUESTER = "expiry"
"""`requested_by` on the receipt of a memory's expiry (`MemoryExpired`)."""

Forgetting = (
    MemoryForgotten
    | SessionForgotten
    | UserForgotten
    | SessionsForgotten
    | MemoriesForgotten
    | MemoryExpired
)
Topic = Literal["turns", "snapshots", "memories"]


def project_forgetting(db: Writes, event: Forgetting) -> None:
    """Erase what `event` names from the read model and note it on the request's receipt."""
    if isinstance(event, MemoryForgotten | SessionForgotten | UserForgotten | MemoryExpired):
        _receive_request(db, event)
    if isinstance(event, SessionForgotten):
        _erase_turns(db, event, _session_turns(event), step="turns")
    elif isinstance(event, UserForgotten) and event.turns_partition is not None:
        _erase_turns(db, event, _partition_turns(event), step=f"turns-{event.turns_partition}")
    elif isinstance(event, SessionsForgotten):
        _erase_snapshots(db, event)
    elif isinstance(event, MemoriesForgotten):
        _erase_memories(db, event)


# -- what each record erases -------------------------------------------------------------------


def _session_turns(request: SessionForgotten) -> dict[str, Any]:
    return {"user_id": request.user_id, "session_id": request.session_id}


def _partition_turns(request: UserForgotten) -> dict[str, Any]:
    """The user's turns read from the request's partition, and those of unknown partition
    (projected before turns kept it: decision 1)."""
    return {"user_id": request.user_id, "partition": {"$in": [request.turns_partition, None]}}


def _erase_turns(
    db: Writes, request: SessionForgotten | UserForgotten, selector: dict[str, Any], step: str
) -> None:
    """The turns `selector` matches (always within the request's user), after the profile
    fields they set."""
    _unset_profile_fields(db, request.user_id, "event_id", set(db.ids(TURNS, selector)))
    turns = db.delete(TURNS, selector)
    _record_step(db, request.event_id, step, "turns", request.occurred_at, {"turns": turns})


def _erase_snapshots(db: Writes, fact: SessionsForgotten) -> None:
    sessions = list(fact.session_ids)
    snapshots = 0
    if sessions:
        selector = {"user_id": fact.user_id, "session_id": {"$in": sessions}}
        snapshots = db.delete(SNAPSHOTS, selector)
    _record_step(
        db,
        fact.request_id,
        f"snapshots-{fact.event_id}",
        "snapshots",
        fact.occurred_at,
        {"snapshots": snapshots, "sessions": len(sessions)},
        created=_fact_fields(fact),
    )


def _erase_memories(db: Writes, fact: MemoriesForgotten) -> None:
    """Every version and logged event of the memories, the saves that decided about them (all
    the user's saves of the type when the request covers saves), and the forgotten sessions'
    reinforcements of memories that stay."""
    user_id, memory_ids = fact.user_id, list(dict.fromkeys(fact.memory_ids))
    erased = set(memory_ids)
    _unset_profile_fields(db, user_id, "memory_id", erased)
    sessions = list(fact.session_ids)
    unlinked = _unlink_reinforcements(db, fact.memory_type, user_id, sessions, erased)
    count_changes(db, user_id, unlinked)  # before their log goes: a redelivery finds no more
    _erase_memory_log(db, fact.memory_type, user_id, memory_ids, sessions)
    _erase_result_stubs(db, user_id, sessions)
    saves = _erase_saves(db, fact, memory_ids)
    mine = {"user_id": user_id, "memory_id": {"$in": memory_ids}}
    versions = db.ids(MEMORIES, mine, "memory_id") if memory_ids else []
    if versions:
        db.delete(MEMORIES, mine)
    count_changes(db, user_id, memory_ids)
    counts = {"memories": len(set(versions)), "versions": len(versions), "saves": saves}
    _record_step(
        db,
        fact.request_id,
        f"memories-{fact.event_id}",
        "memories",
        fact.occurred_at,
        counts,
        fixed={"memory_type": fact.memory_type, "memory_ids": memory_ids},
        created=_fact_fields(fact),
    )


def _unlink_reinforcements(
    db: Writes,
    memory_type: MemoryType,
    user_id: str,
    sessions: list[str],
    erased: Collection[str],
) -> list[str]:
    """Take the forgotten sessions' reinforcements off the fact's type's memories that stay; the
    ids of the memories that lost one. Read from `memory_events`, so before those are erased.

    Only the fact's own type (decision 8): another type's stage may not have read the request
    yet, and it finds a memory's sessions through that evidence."""
    if not sessions:
        return []
    logged = db.ids(
        MEMORY_EVENTS,
        {
            "user_id": user_id,
            "memory_type": memory_type,
            "event_type": "MemoryReinforced",
            "event.evidence.session_id": {"$in": sessions},
        },
        "event",
    )
    unlinked: list[str] = []
    for event in logged:
        if event["memory_id"] in erased:
            continue
        db.update(
            MEMORIES,
            {
                "_id": version_id(event["memory_id"], event["version"]),
                "evidence.event_id": event["event_id"],
            },
            {
                "$pull": {"evidence": {"event_id": event["event_id"]}},
                "$inc": {"reinforcement_count": -1},
            },
        )
        unlinked.append(event["memory_id"])
    # Evidence no logged event accounts for (none is expected) goes too, without a count.
    db.update(
        MEMORIES,
        {"user_id": user_id, "memory_type": memory_type, "evidence.session_id": {"$in": sessions}},
        {"$pull": {"evidence": {"session_id": {"$in": sessions}}}},
        many=True,
    )
    return list(dict.fromkeys(unlinked))


def _erase_memory_log(
    db: Writes, memory_type: MemoryType, user_id: str, memory_ids: list[str], sessions: list[str]
) -> None:
    if memory_ids:
        db.delete(MEMORY_EVENTS, {"user_id": user_id, "memory_id": {"$in": memory_ids}})
    if sessions:
        db.delete(
            MEMORY_EVENTS,
            {
                "user_id": user_id,
                "memory_type": memory_type,
                "event.evidence.session_id": {"$in": sessions},
            },
        )


def _erase_result_stubs(db: Writes, user_id: str, sessions: list[str]) -> None:
    """The snapshot documents an extraction result created after `SessionsForgotten` erased its
    snapshot (decision 7): only stubs, without turns — a whole snapshot of these sessions is
    either erased by its `SessionsForgotten` or new data."""
    if sessions:
        stubs = {
            "user_id": user_id,
            "session_id": {"$in": sessions},
            "turn_ids": {"$exists": False},
        }
        db.delete(SNAPSHOTS, stubs)


def _erase_saves(db: Writes, fact: MemoriesForgotten, memory_ids: list[str]) -> int:
    """The saves that decided about the memories (every save of the type when the request
    covers saves), and the rollbacks and consolidations of the memories (every one of the type
    with them): counted as saves."""
    erased = 0
    for collection in (SAVES, ROLLBACKS, CONSOLIDATIONS):
        if memory_ids:
            mine = {"user_id": fact.user_id, "memory_ids": {"$in": memory_ids}}
            erased += db.delete(collection, mine)
        if fact.saves:
            erased += db.delete(
                collection, {"user_id": fact.user_id, "memory_type": fact.memory_type}
            )
    return erased


def _unset_profile_fields(
    db: Writes, user_id: str, source: Literal["event_id", "memory_id"], erased: Collection[str]
) -> None:
    """Unset the user's profile fields whose `source` is erased; delete a profile left empty.

    Each unset is conditional on the field still holding that observation: a newer one that
    replaced it in the meantime stays."""
    if not erased:
        return
    for fields in db.ids(PROFILES, {"_id": user_id}, "fields"):
        for name, entry in fields.items():
            value = entry.get(source) if isinstance(entry, dict) else None
            if value is not None and value in erased:
                db.update(
                    PROFILES,
                    {"_id": user_id, f"fields.{name}.{source}": value},
                    {"$unset": {f"fields.{name}": ""}},
                )
    db.delete(PROFILES, {"_id": user_id, "fields": {}})


# -- receipts ----------------------------------------------------------------------------------


def _receive_request(
    db: Writes, request: MemoryForgotten | SessionForgotten | UserForgotten | MemoryExpired
) -> None:
    """Write the request's fields on its receipt (the same in every copy of the request)."""
    db.update(ERASURES, {"_id": request.event_id}, {"$set": _request_fields(request)}, upsert=True)


def _request_fields(
    request: MemoryForgotten | SessionForgotten | UserForgotten | MemoryExpired,
) -> dict[str, Any]:
    """Who asked what, and why: a request's fields on its receipt."""
    if isinstance(request, MemoryExpired):
        requested_by, reason = EXPIRY_REQUESTER, f"expired at {request.expires_at.isoformat()}"
    else:
        requested_by, reason = request.requested_by, request.reason
    fields: dict[str, Any] = {
        "user_id": request.user_id,
        "requested_by": requested_by,
        "reason": reason,
        "requested_at": request.occurred_at,
    }
    if isinstance(request, MemoryExpired):
        fields.update(kind="expiry", memory_id=request.memory_id, memory_type=request.memory_type)
    elif isinstance(request, MemoryForgotten):
        fields.update(kind="memory", memory_id=request.memory_id, memory_type=request.memory_type)
    elif isinstance(request, SessionForgotten):
        fields.update(kind="session", session_id=request.session_id)
    else:
        fields.update(kind="user")
    return fields


def _fact_fields(fact: SessionsForgotten | MemoriesForgotten) -> dict[str, Any]:
    """What a stage's fact knows of its request, for a receipt it is the first to write."""
    fields: dict[str, Any] = {"kind": fact.scope, "user_id": fact.user_id}
    if fact.scope == "session" and len(fact.session_ids) == 1:
        fields["session_id"] = fact.session_ids[0]
    if isinstance(fact, MemoriesForgotten) and fact.scope in ("memory", "expiry"):
        fields["memory_type"] = fact.memory_type
        if len(fact.memory_ids) == 1:
            fields["memory_id"] = fact.memory_ids[0]
    return fields


def _record_step(
    db: Writes,
    request_id: str,
    step: str,
    topic: Topic,
    at: datetime,
    counts: dict[str, int],
    *,
    fixed: dict[str, Any] | None = None,
    created: dict[str, Any] | None = None,
) -> None:
    """Note one step on the receipt: `fixed` values are the record's own, `counts` only rise."""
    path = f"steps.{step}"
    change: dict[str, Any] = {
        "$set": {
            f"{path}.{name}": value
            for name, value in {"topic": topic, "at": at, **(fixed or {})}.items()
        },
        "$max": {f"{path}.{name}": count for name, count in counts.items()},
    }
    if created:
        change["$setOnInsert"] = created
    db.update(ERASURES, {"_id": request_id}, change, upsert=True)


def note_destroyed_keys(
    db: Writes,
    plan: KeysToDestroy,
    event: SessionForgotten | UserForgotten | MemoriesForgotten,
    count: int,
) -> None:
    """Count the data keys `event` destroyed as `keys_destroyed.<step>` on the request's
    receipt (`$max`: a redelivery destroys nothing more and lowers nothing).

    The keys die before the record's erasure is projected, so this may create the receipt: it
    then starts with what the record knows of the request (a request's own fields; a stage's
    fact's kind and user, as the fact's first step does: decision 6). The count is kept apart
    from `steps`, which only the erasures write, so a step exists only once its erasure is
    done."""
    first = _fact_fields(event) if isinstance(event, MemoriesForgotten) else _request_fields(event)
    db.update(
        ERASURES,
        {"_id": plan.request_id},
        {"$max": {f"keys_destroyed.{plan.step}": count}, "$setOnInsert": first},
        upsert=True,
    )
