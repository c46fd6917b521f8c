"""Short-term memory and audit: turns, promoted snapshots (with L1_RAW history), dead letters."""

from __future__ import annotations

from events.dead_letters import DeadLetterRedriven, InputDeadLettered
from events.snapshots import SnapshotPromoted
from events.turns import TurnRecorded
from handlers.extraction.transcript import transcript_of
from handlers.window import turn_fingerprint
from projections.profiles import apply_user_name
from projections.store import DEAD_LETTERS, SNAPSHOTS, TURNS
from projections.writes import Writes


def project_turn(db: Writes, turn: TurnRecorded, partition: int | None = None) -> None:
    """Store a turn (short-term memory) and let a named user turn name the profile.

    The fingerprint is the window's (`handlers.window.turn_fingerprint`): a turn re-sent under
    its id is the same turn; other content under the same id is an `IdCollision`. `partition`
    is the turns-topic partition the turn was read from (None when unknown): a `UserForgotten`
    copy erases the turns of its own partition (`projections.forgetting`). It is not part of
    the fingerprint — where a turn was read from is not what it says.
    """
    document = turn.model_dump(exclude={"event_id", "event_type", "schema_version"})
    stored = {**document, "snapshot_id": None, "partition": partition}
    db.insert_once(TURNS, turn.event_id, stored, turn_fingerprint(turn))
    # The snapshot may have been projected first (turns and snapshots are separate streams):
    # each side writes, then links the other, so whichever comes second links them.
    db.link_turn(turn.event_id)
    apply_user_name(db, turn)


def project_snapshot(db: Writes, snapshot: SnapshotPromoted) -> None:
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
    db.update(  # the id held by other turns: the upsert's insert fails on the duplicate id
        SNAPSHOTS,
        {"_id": snapshot.event_id, **same_or_no_turns},
        {"$set": fields},
        upsert=True,
        collision=f"snapshot {snapshot.event_id!r} already holds other turns",
    )
    db.update(
        TURNS,
        {"_id": {"$in": turn_ids}},
        {"$set": {"snapshot_id": snapshot.event_id}},
        many=True,
    )


def project_dead_letter(db: Writes, record: InputDeadLettered) -> None:
    """Keep a dead letter, with its reason, for operators (the first one under an id stays).

    A redrive of it may have been projected first (a replay reads the dead-letters topic's
    partitions one after the other): then its document holds only `redrives`, and is filled in.
    """
    document = record.model_dump(exclude={"event_id", "event_type", "schema_version"})
    db.update(
        DEAD_LETTERS, {"_id": record.event_id, "stage": {"$exists": False}}, {"$set": document}
    )
    db.update(DEAD_LETTERS, {"_id": record.event_id}, {"$setOnInsert": document}, upsert=True)


def project_redrive(db: Writes, redrive: DeadLetterRedriven) -> None:
    """Note an operator's redrive on its dead letter (a redelivery adds nothing)."""
    entry = redrive.model_dump(exclude={"event_type", "schema_version", "dead_letter_id"})
    db.update(
        DEAD_LETTERS,
        {"_id": redrive.dead_letter_id},
        {"$addToSet": {"redrives": entry}},
        upsert=True,
    )


def _raw_history(snapshot: SnapshotPromoted) -> str | None:
    """L1_RAW: the snapshot in the rendered multi-speaker format (None if it cannot be rendered)."""
    try:
        return transcript_of(snapshot).text
    except ValueError:  # e.g. the caller gave the current user two different names
        return None
