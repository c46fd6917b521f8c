"""How projections reach MongoDB: one write at a time (live), or in bulk (replay).

The projection functions say *what* to write — guarded inserts, conditional updates, claims —
through a `Writes`; they never call the driver themselves. Two executors:

* `LiveWrites` (the projector): every write at once, in order, with its result checked: an
  insert whose id already holds other content raises `IdCollision`, a claim reads who holds it.
* `BulkWrites` (`memstream replay` into a fresh database): writes are queued per collection and
  sent as ordered `bulk_write` batches, so each document's writes keep the log's order. Claims
  are decided in memory (the database starts empty: the first record to claim a slot holds it),
  and a replay reads turns before snapshots, so a snapshot links its turns without a lookup.
  Inserts that found their id taken are checked for collisions after each batch.
  Because the database starts empty, the first `insert_once` of an id is a plain insert (an
  upsert costs several times as much on SecantusDB), a repeat is compared in memory, and a
  many-document update by a list of ids is sent as one update per id (an `$in` on `_id` scans
  the collection on SecantusDB): see docs/architecture.md, "Replay".

Erasure (`projections.forgetting`) adds a delete and a read. A receipt needs the count a delete
returns and the read needs the database as the log has made it so far, so `BulkWrites` sends
everything queued first and then runs them at once — erasures are rare, a flush per erasure is
cheap, and flushing every collection keeps the log's order across collections too. A delete
also drops what the replay decided in memory about the documents it removed: an id written
again after its erasure is new data, and must be written as the live projector writes it (a
plain insert, a fresh claim), not taken for a repeat of the erased document.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pymongo import InsertOne, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError

from projections.identity import FINGERPRINT, IdCollision, check_same, insert_once
from projections.store import SNAPSHOTS, TURNS, Db

Operation = InsertOne[Any] | UpdateOne | UpdateMany


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


@dataclass
class _Queued:
    operation: Operation
    once: tuple[str, str] | None = None
    collision: str | None = None


@dataclass
class BulkWrites:
    """Writes queued per collection and sent as ordered bulk batches (a replay)."""

    db: Db
    batch: int = 1_000
    queued: dict[str, list[_Queued]] = field(default_factory=dict)
    claims: dict[tuple[str, str, str], str] = field(default_factory=dict)
    failed_claims: set[tuple[str, str, str]] = field(default_factory=set)
    collisions: list[str] = field(default_factory=list)
    written: int = 0
    inserted: dict[tuple[str, str], str] = field(default_factory=dict)
    """Fingerprint of every document `insert_once` created, by (collection, id)."""
    upserted: set[tuple[str, Any]] = field(default_factory=set)
    """(collection, id) of the documents an `update` may have created by upsert."""
    upserts_anywhere: set[str] = field(default_factory=set)
    """Collections an upsert by a selector other than `_id` may have created documents in."""

    def insert_once(
        self, collection: str, doc_id: str, document: dict[str, Any], fingerprint: str
    ) -> None:
        held = self.inserted.get((collection, doc_id))
        if held is not None:  # inserted by this replay: a redelivery, or a collision
            if held != fingerprint:
                self.collisions.append(f"{collection} {doc_id!r} already holds other content")
            return
        if collection not in self.upserts_anywhere and (collection, doc_id) not in self.upserted:
            self.inserted[(collection, doc_id)] = fingerprint
            new = InsertOne({"_id": doc_id, **document, FINGERPRINT: fingerprint})
            self._queue(collection, _Queued(new))
            return
        operation = UpdateOne(
            {"_id": doc_id}, {"$setOnInsert": {**document, FINGERPRINT: fingerprint}}, upsert=True
        )
        self._queue(collection, _Queued(operation, once=(doc_id, fingerprint)))

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
        ids = selector.get("_id")
        listed = _listed(ids) if many and not upsert and list(selector) == ["_id"] else None
        if listed is not None:
            for doc_id in dict.fromkeys(listed):
                self._queue(collection, _Queued(UpdateOne({"_id": doc_id}, change)))
            return
        if upsert:
            if isinstance(ids, str):
                self.upserted.add((collection, ids))
            else:
                self.upserts_anywhere.add(collection)
        kind = UpdateMany if many else UpdateOne
        self._queue(collection, _Queued(kind(selector, change, upsert=upsert), collision=collision))

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
        holder = self.claims.setdefault((collection, doc_id, slot), fingerprint)
        if holder != fingerprint:
            return False
        if record.get("failure") is not None:
            self.failed_claims.add((collection, doc_id, slot))
        value = {**record, FINGERPRINT: fingerprint}
        change = (
            _taking(slot, value, created)
            if slot
            else {"$setOnInsert": {**(created or {}), **value}}
        )
        self.update(collection, {"_id": doc_id}, change, upsert=True)
        return True

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
        held = (collection, doc_id, slot)
        if held in self.failed_claims:
            del self.claims[held]
            self.failed_claims.discard(held)
        return self.claim(collection, doc_id, slot, record, fingerprint, created=created)

    def link_turn(self, turn_id: str) -> None:
        """Nothing to do: a replay reads every turn before any snapshot."""

    def delete(self, collection: str, selector: dict[str, Any]) -> int:
        self.flush()
        doomed = set(self.ids(collection, selector))
        if not doomed:
            return 0
        deleted = self.db[collection].delete_many(selector).deleted_count
        self.written += 1
        self._forget(collection, doomed)
        return deleted

    def ids(self, collection: str, selector: dict[str, Any], field: str = "_id") -> list[Any]:
        self.flush()
        return _values(self.db[collection].find(selector, {field: 1}), field)

    @property
    def pending(self) -> int:
        return sum(len(queue) for queue in self.queued.values())

    def flush(self) -> None:
        """Send everything queued, collection by collection, each batch in order."""
        for collection, queue in self.queued.items():
            for start in range(0, len(queue), self.batch):
                self._send(collection, queue[start : start + self.batch])
        self.queued = {}

    def _forget(self, collection: str, doomed: set[Any]) -> None:
        """Drop the in-memory decisions about the deleted documents `doomed` of `collection`."""
        self.inserted = {
            key: held
            for key, held in self.inserted.items()
            if not (key[0] == collection and key[1] in doomed)
        }
        self.upserted = {k for k in self.upserted if not (k[0] == collection and k[1] in doomed)}
        erased = {k for k in self.claims if k[0] == collection and k[1] in doomed}
        for key in erased:
            del self.claims[key]
        self.failed_claims -= erased

    def _queue(self, collection: str, queued: _Queued) -> None:
        self.queued.setdefault(collection, []).append(queued)

    def _send(self, collection: str, items: list[_Queued]) -> None:
        while items:
            try:
                result = self.db[collection].bulk_write([i.operation for i in items], ordered=True)
            except BulkWriteError as exc:
                failed = exc.details["writeErrors"][0]["index"]
                self.written += failed
                self._check(collection, items[:failed], exc.details.get("upserted", []))
                item = items[failed]
                self.collisions.append(
                    item.collision or f"{collection}: {exc.details['writeErrors'][0]['errmsg']}"
                )
                items = items[failed + 1 :]
                continue
            self.written += len(items)
            self._check(collection, items, [{"index": i} for i in result.upserted_ids or {}])
            return

    def _check(self, collection: str, items: list[_Queued], upserted: list[dict[str, Any]]) -> None:
        inserted = {entry["index"] for entry in upserted}
        for index, item in enumerate(items):
            if item.once is not None and index not in inserted:
                doc_id, fingerprint = item.once
                try:
                    check_same(self.db[collection], doc_id, fingerprint)
                except IdCollision as exc:
                    self.collisions.append(str(exc))


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


def _listed(condition: Any) -> list[Any] | None:
    """The ids of a condition that is exactly `{"$in": [...]}`; None for any other condition."""
    if isinstance(condition, dict) and list(condition) == ["$in"]:
        return list(condition["$in"])
    return None
