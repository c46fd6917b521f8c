"""Writing a document once under an id, and noticing when an id is reused for other content.

Every id in memstream derives from the inputs, so the same id with the same content is a
redelivery (nothing to do) while the same id with *other* content is a collision: a producer
reusing an event id, or a bug. `insert_once` never lets a collision pass silently; it raises
`IdCollision`, and the projector dead-letters the event with the reason.
"""

from __future__ import annotations

import hashlib
from datetime import date, datetime, time
from typing import Any

import orjson
from pymongo.collection import Collection

from events.base import at_stored_precision

FINGERPRINT = "fingerprint"
"""The field holding what a document's content hashed to when it was first written."""


class IdCollision(ValueError):
    """An id already names other content; the message says which id and where."""


def fingerprint_of(content: Any) -> str:
    """A stable hash of content (keys sorted; times at the read model's millisecond precision).

    Pass a `model_dump()` in python mode, so times are datetimes and can be cut to what MongoDB
    keeps: an event rebuilt from the read model (`memstream replay --from-collections`) then
    fingerprints like the original. The same bytes as `orjson.dumps(at_stored_precision(content))`
    (`events.base`), without walking every number of a vector in Python: orjson hands each time
    to `_stored_time`, which writes it as orjson would once cut."""
    data = orjson.dumps(content, default=_stored_time, option=_CANONICAL)
    return hashlib.sha256(data).hexdigest()[:32]


_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME


def _stored_time(value: Any) -> str:
    """A time as orjson writes `at_stored_precision(value)` (RFC 3339, microseconds only when
    not zero: `isoformat`'s format)."""
    if isinstance(value, datetime):
        return at_stored_precision(value).isoformat()  # type: ignore[no-any-return]
    if isinstance(value, date | time):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def insert_once(
    collection: Collection[dict[str, Any]], doc_id: str, document: dict[str, Any], fingerprint: str
) -> bool:
    """Insert `document` under `doc_id` unless it exists; True if this call inserted it.

    An existing document with another `fingerprint` raises `IdCollision`
    (documents written before fingerprints existed are taken on trust).
    """
    result = collection.update_one(
        {"_id": doc_id}, {"$setOnInsert": {**document, FINGERPRINT: fingerprint}}, upsert=True
    )
    if result.upserted_id is not None:
        return True
    check_same(collection, doc_id, fingerprint)
    return False


def check_same(collection: Collection[dict[str, Any]], doc_id: str, fingerprint: str) -> None:
    """Raise `IdCollision` if the document `doc_id` was written with another `fingerprint`."""
    existing = collection.find_one({"_id": doc_id}, {FINGERPRINT: 1})
    stored = (existing or {}).get(FINGERPRINT)
    if stored is not None and stored != fingerprint:
        raise IdCollision(f"{collection.name} {doc_id!r} already holds other content")
