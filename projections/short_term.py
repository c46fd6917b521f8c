"""Short-term memory and audit: turns, promoted snapshots (with L1_RAW history), dead letters."""

from __future__ import annotations

from pymongo.errors import DuplicateKeyError

from events.dead_letters import InputDeadLettered
from events.snapshots import SnapshotPromoted
from events.turns import TurnRecorded
from handlers.extraction.transcript import transcript_of
from handlers.window import turn_fingerprint
from projections.identity import IdCollision, insert_once
from projections.profiles import apply_user_name
from projections.store import DEAD_LETTERS, SNAPSHOTS, TURNS, Db


def project_turn(db: Db, turn: TurnRecorded) -> None:
    """Store a turn (short-term memory) and let a named user turn name the profile.

    The fingerprint is the window's (`handlers.window.turn_fingerprint`): a turn re-sent under
    its id is the same turn; other content under the same id is an `IdCollision`.
    """
    document = turn.model_dump(exclude={"event_id", "event_type", "schema_version"})
    insert_once(db[TURNS], turn.event_id, {**document, "snapshot_id": None}, turn_fingerprint(turn))
    # The snapshot may have been projected first (turns and snapshots are separate streams):
    # each side writes, then reads the other, so whichever comes second links them.
    snapshot = db[SNAPSHOTS].find_one({"turn_ids": turn.event_id}, {"_id": 1})
    if snapshot is not None:
        db[TURNS].update_one({"_id": turn.event_id}, {"$set": {"snapshot_id": snapshot["_id"]}})
    apply_user_name(db, turn)


def project_snapshot(db: Db, snapshot: SnapshotPromoted) -> None:
    """Record the promotion (with its raw history in the rendered format) and mark its turns.

    `$set`, not an insert: the snapshot's extraction records (another topic) may have created
    the document first. A snapshot id names one run of turns, so a document under this id that
    already lists other turns is an `IdCollision`.
    """
    turn_ids = list(snapshot.turn_ids)
    fields = {
        "user_id": snapshot.user_id,
        "session_id": snapshot.session_id,
        "agent_id": snapshot.agent_id,
        "seq": snapshot.seq,
        "reason": snapshot.reason,
        "turn_ids": turn_ids,
        "turn_count": len(turn_ids),
        "raw_history": _raw_history(snapshot),
        "first_turn_at": snapshot.turns[0].occurred_at,
        "last_turn_at": snapshot.turns[-1].occurred_at,
        "promoted_at": snapshot.occurred_at,
    }
    same_or_no_turns = {"$or": [{"turn_ids": {"$exists": False}}, {"turn_ids": turn_ids}]}
    try:
        db[SNAPSHOTS].update_one(
            {"_id": snapshot.event_id, **same_or_no_turns}, {"$set": fields}, upsert=True
        )
    except DuplicateKeyError as exc:  # the id exists with other turns: the upsert's insert failed
        raise IdCollision(f"snapshot {snapshot.event_id!r} already holds other turns") from exc
    db[TURNS].update_many({"_id": {"$in": turn_ids}}, {"$set": {"snapshot_id": snapshot.event_id}})


def project_dead_letter(db: Db, record: InputDeadLettered) -> None:
    """Keep a dead letter, with its reason, for operators (the first one under an id stays)."""
    document = record.model_dump(exclude={"event_id", "event_type", "schema_version"})
    db[DEAD_LETTERS].update_one({"_id": record.event_id}, {"$setOnInsert": document}, upsert=True)


def _raw_history(snapshot: SnapshotPromoted) -> str | None:
    """L1_RAW: the snapshot in the rendered multi-speaker format (None if it cannot be rendered)."""
    try:
        return transcript_of(snapshot).text
    except ValueError:  # e.g. the caller gave the current user two different names
        return None
