"""Named aggregation pipelines for analysts (`memstream query NAME`), documented and printable.

Each query is a MongoDB aggregation on one collection of the read model (docs/collections.md
describes the documents). `--explain` prints it as `db.<collection>.aggregate([...])`, ready to
paste into `mongosh`. A query that takes `--user` is scoped to that user.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from projections.store import DEAD_LETTERS, MEMORIES, SNAPSHOTS

Pipeline = list[dict[str, Any]]


@dataclass(frozen=True)
class Parameters:
    """What a query may be narrowed by."""

    user: str | None = None
    memory_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 20
    types: tuple[str, ...] = ()


@dataclass(frozen=True)
class Query:
    """A named question, the collection it asks, and how to build its pipeline."""

    description: str
    collection: str
    build: Callable[[Parameters], Pipeline]


def _user(p: Parameters) -> dict[str, Any]:
    return {"user_id": p.user} if p.user else {}


def _between(field: str, p: Parameters) -> dict[str, Any]:
    bounds: dict[str, Any] = {}
    if p.since:
        bounds["$gte"] = p.since
    if p.until:
        bounds["$lt"] = p.until
    return {field: bounds} if bounds else {}


QUERIES: dict[str, Query] = {
    "most-reinforced": Query(
        "current memories restated most often (reinforcement count), most first",
        MEMORIES,
        lambda p: [
            {"$match": {**_user(p), "status": "current", "reinforcement_count": {"$gt": 0}}},
            {"$sort": {"reinforcement_count": -1, "_id": 1}},
            {"$limit": p.limit},
            {
                "$project": {
                    "_id": 0,
                    "user_id": 1,
                    "memory_type": 1,
                    "subject": 1,
                    "text": 1,
                    "reinforcement_count": 1,
                }
            },
        ],
    ),
    "superseded": Query(
        "memory versions superseded in a period (--since/--until), with what replaced them",
        MEMORIES,
        lambda p: [
            {"$match": {**_user(p), "status": "superseded", **_between("superseded_by.at", p)}},
            {"$sort": {"superseded_by.at": 1, "_id": 1}},
            {
                "$project": {
                    "_id": 0,
                    "user_id": 1,
                    "memory_id": 1,
                    "version": 1,
                    "text": 1,
                    "replaced_by": "$superseded_by.text",
                    "reason": "$superseded_by.reason",
                    "at": "$superseded_by.at",
                }
            },
        ],
    ),
    "lineage": Query(
        "every version of one memory (--memory, --user), oldest first",
        MEMORIES,
        lambda p: [
            {"$match": {**_user(p), "memory_id": p.memory_id}},
            {"$sort": {"version": 1}},
            {
                "$project": {
                    "_id": 0,
                    "version": 1,
                    "status": 1,
                    "text": 1,
                    "reinforcement_count": 1,
                    "created_at": 1,
                    "created_by_event": 1,
                }
            },
        ],
    ),
    "counts": Query(
        "current memories per user and memory type",
        MEMORIES,
        lambda p: [
            {"$match": {**_user(p), "status": "current"}},
            {
                "$group": {
                    "_id": {"user_id": "$user_id", "memory_type": "$memory_type"},
                    "memories": {"$sum": 1},
                }
            },
            {"$sort": {"_id.user_id": 1, "_id.memory_type": 1}},
            {
                "$project": {
                    "_id": 0,
                    "user_id": "$_id.user_id",
                    "memory_type": "$_id.memory_type",
                    "memories": 1,
                }
            },
        ],
    ),
    "promotions": Query(
        "snapshots per day and promotion reason (count, tokens, topic_shift, idle, flush)",
        SNAPSHOTS,
        lambda p: [
            {"$match": {**_user(p), "reason": {"$exists": True}, **_between("promoted_at", p)}},
            {
                "$group": {
                    "_id": {
                        "day": {"$dateToString": {"format": "%Y-%m-%d", "date": "$promoted_at"}},
                        "reason": "$reason",
                    },
                    "snapshots": {"$sum": 1},
                }
            },
            {"$sort": {"_id.day": 1, "_id.reason": 1}},
            {"$project": {"_id": 0, "day": "$_id.day", "reason": "$_id.reason", "snapshots": 1}},
        ],
    ),
    "waiting": Query(
        "snapshots whose extraction has not finished, per enabled memory type",
        SNAPSHOTS,
        lambda p: [
            {"$match": {**_user(p), "turn_ids": {"$exists": True}}},
            {
                "$facet": {
                    t: [{"$match": {f"extractions.{t}": {"$exists": False}}}, {"$count": "waiting"}]
                    for t in p.types
                }
            },
        ],
    ),
    "dead-letters": Query(
        "dead letters per stage and reason (an operator query: all users)",
        DEAD_LETTERS,
        lambda p: [
            {
                "$group": {
                    "_id": {"stage": "$stage", "reason": "$reason"},
                    "records": {"$sum": 1},
                    "last": {"$max": "$dead_lettered_at"},
                }
            },
            {"$sort": {"records": -1, "_id.stage": 1}},
            {"$limit": p.limit},
            {
                "$project": {
                    "_id": 0,
                    "stage": "$_id.stage",
                    "reason": "$_id.reason",
                    "records": 1,
                    "last": 1,
                }
            },
        ],
    ),
}


def explain(name: str, parameters: Parameters) -> str:
    """The query as a `mongosh` command."""
    query = QUERIES[name]
    pipeline = json.dumps(query.build(parameters), indent=2, default=_shell_value)
    return f"db.{query.collection}.aggregate({pipeline})"


def _shell_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$date": value.isoformat()}
    raise TypeError(f"cannot print {type(value).__name__}")


def rows(db: Any, name: str, parameters: Parameters) -> list[dict[str, Any]]:
    """Run a named query; rows as plain dicts (the `waiting` counts flattened per type)."""
    query = QUERIES[name]
    found = list(db[query.collection].aggregate(query.build(parameters)))
    if name == "waiting":
        (facets,) = found or [{}]
        return [
            {"memory_type": t, "waiting": (facets.get(t) or [{"waiting": 0}])[0]["waiting"]}
            for t in parameters.types
        ]
    return found
