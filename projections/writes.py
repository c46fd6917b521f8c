"""How projections reach MongoDB: what they may ask (`Writes`), and one write at a time.

The projection functions say *what* to write — guarded inserts, conditional updates, claims —
through a `Writes`; they never call the driver themselves. Two executors:

* `LiveWrites`: every write at once, in order, with its result checked: an insert whose id
  already holds other content raises `IdCollision`, a claim reads who holds it. It is the
  reference: `project` applies one record with it.
* `projections.batch` (the projector and `memstream replay`): a batch of records decided
  against what the database holds and sent as one ordered `bulk_write` per collection, leaving
  the database as `LiveWrites` record by record would (docs/architecture.md, "Replay").

Erasure (`projections.forgetting`) adds a delete and a read: a receipt needs the count a delete
returns and the read needs the database as the log has made it so far, so the batch projects
an erasing record on its own, with `LiveWrites`, after sending everything before it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from pymongo.errors import DuplicateKeyError

from projections.store import SNAPSHOTS, TURNS, Db
from projections.write_once import FINGERPRINT, IdCollision, insert_once


class Writes(Protocol):
    """What a projection may ask of the database."""

    def insert_once(
        self, collection: str, doc_id: str, document: dict[str, Any], fingerprint: str
    ) -> None:
        """Insert unless `doc_id` exists; other content under it is an `IdCollision`."""
        ...

    def update(
        self,
        collection: str,
        selector: dict[str, Any],
        change: dict[str, Any],
        *,
        upsert: bool = False,
        many: bool = False,
        collision: str | None = None,
    ) -> None:
        """Apply `change` to what `selector` matches. With `collision`, a duplicate key on the
        upsert means the id is taken by other content (`IdCollision` with that message)."""
        ...

    def claim(
        self,
        collection: str,
        doc_id: str,
        slot: str,
        record: dict[str, Any],
        fingerprint: str,
        *,
        created: dict[str, Any] | None = None,
    ) -> bool:
        """Take `slot` of document `doc_id` (the whole document when `slot` is "") for a record
        with `fingerprint`; True if this record holds it (first, or the same record again),
        False if another record took it first. A document the claim creates starts with the
        fields `created`."""
        ...

    def replace_failed(
        self,
        collection: str,
        doc_id: str,
        slot: str,
        record: dict[str, Any],
        fingerprint: str,
        *,
        created: dict[str, Any] | None = None,
    ) -> bool:
        """Like `claim`, but the record may also take `slot` from a record whose `failure` is
        set (an operator's redrive of a failed extraction); True if this record holds it."""
        ...

    def link_turn(self, turn_id: str) -> None:
        """Point a turn at its snapshot if the snapshot was projected first."""
        ...

    def delete(self, collection: str, selector: dict[str, Any]) -> int:
        """Delete every document `selector` matches, after every write asked for before;
        how many were deleted (0 on a redelivery)."""
        ...

    def ids(self, collection: str, selector: dict[str, Any], field: str = "_id") -> list[Any]:
        """The `field` (a dotted path) of every document `selector` matches, after every write
        asked for before; documents without it are left out."""
        ...


class LiveWrites:
    """Every write at once (the projector)."""

    def __init__(self, db: Db) -> None:
        self.db = db

    def insert_once(
        self, collection: str, doc_id: str, document: dict[str, Any], fingerprint: str
    ) -> None:
        insert_once(self.db[collection], doc_id, document, fingerprint)

    def update(
        self,
        collection: str,
        selector: dict[str, Any],
        change: dict[str, Any],
        *,
        upsert: bool = False,
        many: bool = False,
        collision: str | None = None,
    ) -> None:
        target = self.db[collection]
        try:
            if many:
                target.update_many(selector, change, upsert=upsert)
            else:
                target.update_one(selector, change, upsert=upsert)
        except DuplicateKeyError as exc:
            if collision is None:
                raise
            raise IdCollision(collision) from exc

    def claim(
        self,
        collection: str,
        doc_id: str,
        slot: str,
        record: dict[str, Any],
        fingerprint: str,
        *,
        created: dict[str, Any] | None = None,
    ) -> bool:
        target = self.db[collection]
        if not slot:
            if (
                target.update_one(
                    {"_id": doc_id},
                    {"$setOnInsert": {**(created or {}), **record, FINGERPRINT: fingerprint}},
                    upsert=True,
                ).upserted_id
                is not None
            ):
                return True
            held = target.find_one({"_id": doc_id}, {FINGERPRINT: 1}) or {}
            return bool(held.get(FINGERPRINT, fingerprint) == fingerprint)
        try:
            target.update_one(
                {"_id": doc_id, slot: {"$exists": False}},
                _taking(slot, {**record, FINGERPRINT: fingerprint}, created),
                upsert=True,
            )
            return True
        except DuplicateKeyError:  # the slot is taken: by this record (a redelivery) or another
            held = target.find_one({"_id": doc_id}, {slot: 1}) or {}
            for part in slot.split("."):
                held = held.get(part) or {}
            return bool(held.get(FINGERPRINT, fingerprint) == fingerprint)

    def replace_failed(
        self,
        collection: str,
        doc_id: str,
        slot: str,
        record: dict[str, Any],
        fingerprint: str,
        *,
        created: dict[str, Any] | None = None,
    ) -> bool:
        self.db[collection].update_one(
            {"_id": doc_id, f"{slot}.failure": {"$exists": True, "$ne": None}},
            {"$set": {slot: {**record, FINGERPRINT: fingerprint}}},
        )
        return self.claim(collection, doc_id, slot, record, fingerprint, created=created)

    def link_turn(self, turn_id: str) -> None:
        snapshot = self.db[SNAPSHOTS].find_one({"turn_ids": turn_id}, {"_id": 1})
        if snapshot is not None:
            self.db[TURNS].update_one({"_id": turn_id}, {"$set": {"snapshot_id": snapshot["_id"]}})

    def delete(self, collection: str, selector: dict[str, Any]) -> int:
        return self.db[collection].delete_many(selector).deleted_count

    def ids(self, collection: str, selector: dict[str, Any], field: str = "_id") -> list[Any]:
        return _values(self.db[collection].find(selector, {field: 1}), field)


def _taking(slot: str, value: dict[str, Any], created: dict[str, Any] | None) -> dict[str, Any]:
    """The change that puts `value` in `slot`, starting a new document with `created`."""
    change: dict[str, Any] = {"$set": {slot: value}}
    if created:
        change["$setOnInsert"] = created
    return change


def _values(documents: Iterable[dict[str, Any]], field: str) -> list[Any]:
    """The value at the dotted path `field` of each document that has one."""
    found: list[Any] = []
    for document in documents:
        value: Any = document
        for part in field.split("."):
            value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
        if value is not _MISSING:
            found.append(value)
    return found


_MISSING = object()
