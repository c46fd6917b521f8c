"""Reading one read model for a comparison with another (`handlers.comparison`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection

from handlers.comparison import Cost, Key, Remembered, Side
from projections.store import MEMORIES, MEMORY_EVENTS, SNAPSHOTS, Db


def side_of(db: Db, users: Collection[str] = ()) -> Side:
    """The read model `db` as a comparison reads it: its current memories (of `users`, if
    given), its memory events counted per user, type and event type, and each type's extraction
    cost (of every user: what the run cost)."""
    chosen = {"user_id": {"$in": list(users)}} if users else {}
    memories = [
        Remembered(
            user_id=str(doc["user_id"]),
            memory_type=str(doc["memory_type"]),
            subject=str(doc.get("subject", "")),
            text=str(doc.get("text", "")),
            snapshot_id=_first_snapshot(doc),
        )
        for doc in db[MEMORIES].find(
            {"status": "current", **chosen},
            {"user_id": 1, "memory_type": 1, "subject": 1, "text": 1, "evidence": 1},
        )
    ]
    events: dict[Key, Counter[str]] = defaultdict(Counter)
    grouped = db[MEMORY_EVENTS].aggregate(
        [
            {"$match": chosen},
            {
                "$group": {
                    "_id": {"u": "$user_id", "t": "$memory_type", "e": "$event_type"},
                    "n": {"$sum": 1},
                }
            },
        ]
    )
    for row in grouped:
        key = row["_id"]
        events[(str(key["u"]), str(key["t"]))][str(key["e"])] += int(row["n"])
    return Side(db.name, memories, dict(events), extraction_costs(db))


def _first_snapshot(doc: dict[str, object]) -> str | None:
    evidence = doc.get("evidence")
    if isinstance(evidence, list) and evidence and isinstance(evidence[0], dict):
        found = evidence[0].get("snapshot_id")
        return str(found) if found else None
    return None


def extraction_costs(db: Db) -> dict[str, Cost]:
    """Per memory type: the snapshots extracted (and failed), the LLM calls and tokens they
    took (a scan of every snapshot: an operator's report, not a request path)."""
    totals: dict[str, Cost] = {}
    for doc in db[SNAPSHOTS].find({"extractions": {"$exists": True}}, {"extractions": 1}):
        for memory_type, extraction in (doc.get("extractions") or {}).items():
            usage = extraction.get("usage") or {}
            before = totals.get(memory_type, Cost())
            totals[memory_type] = Cost(
                snapshots=before.snapshots + 1,
                failed=before.failed + (1 if extraction.get("failure") else 0),
                calls=before.calls + int(usage.get("calls", 0)),
                prompt_tokens=before.prompt_tokens + int(usage.get("prompt_tokens", 0)),
                completion_tokens=before.completion_tokens + int(usage.get("completion_tokens", 0)),
            )
    return totals
