"""Deciding a batch's writes as `LiveWrites` would, against what the database held and what
earlier records of the batch wrote; queueing them for one ordered bulk per collection.

What the batch knows of a document (`Decider.known`, filled by `projections.batch`'s fetch):

* *absent*: not in the database when the batch began. The first write that creates it — an
  `insert_once`, a claim, an upsert — makes it *new*: the whole document is held here, every
  later write of the batch to it is applied in memory (`projections.documents`), and it is sent
  as one insert at the end. A write to it before that changes nothing and is not sent.
* *stored*: in the database, with the fields the batch's decisions and conditions read
  (fingerprints, claimed slots, a snapshot's turns, a profile's field, a version's status).
  Each write is decided here — one whose condition fails is not sent, one that would set what
  the document holds is not sent — and those sent keep their condition, so the server checks
  it again. The writes of one document are folded into one update where that changes nothing
  (`projections.queued.folded`): two claims of one snapshot, the counter of one user, a profile
  field set by several turns.
* *not fetched*: a document no decision reads (the turns a snapshot lists): its writes are sent
  as asked, for the server to decide.

A folded update whose second condition read what the first changed carries, instead, the
fetched values it was decided on, and is sent as an upsert (so are claims): if another projector
changed the document since the fetch, it fails on the duplicate id instead of being applied
wrongly, and the batch is decided again (`projections.batch`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from projections.documents import (
    Unsupported,
    apply_change,
    changed_paths,
    condition_paths,
    covered,
    matches,
    normal,
    overlapping,
    reached,
)
from projections.queued import Key, Queued, folded
from projections.store import SNAPSHOTS, TURNS
from projections.write_once import FINGERPRINT, IdCollision

"""(collection, document id)."""
ABSENT = None


@dataclass
class Decider:
    """A `Writes` for one run of records: decides, applies new documents in memory, queues."""

    known: dict[Key, dict[str, Any] | None]
    tracked: dict[str, frozenset[str]]
    """The fields fetched for the stored documents of each collection."""
    new: set[Key] = field(default_factory=set)
    queues: dict[str, list[Queued]] = field(default_factory=dict)
    last: dict[Key, Queued] = field(default_factory=dict)
    listing: dict[str, str] = field(default_factory=dict)
    """Turn id → the snapshot of this batch that first listed it."""
    unlinked: dict[str, None] = field(default_factory=dict)
    """Turns whose snapshot is looked up again after the writes (another projector's)."""

    # -- the Writes protocol -------------------------------------------------------------------

    def insert_once(
        self, collection: str, doc_id: str, document: dict[str, Any], fingerprint: str
    ) -> None:
        key = (collection, doc_id)
        state = self._fetched(key)
        if state is ABSENT:
            self._create(key, {"_id": doc_id, **document, FINGERPRINT: fingerprint})
            return
        held = state.get(FINGERPRINT)
        if held is not None and held != fingerprint:
            raise IdCollision(f"{collection} {doc_id!r} already holds other content")

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
        condition = {name: value for name, value in selector.items() if name != "_id"}
        if many:
            self._update_listed(collection, listed(ids), condition, change, upsert=upsert)
            return
        if ids is None or isinstance(ids, Mapping):
            raise Unsupported("an update not of one document by its id")
        key = (collection, ids)
        if collection == TURNS and "snapshot_id" in changed_paths(change):
            self.unlinked.pop(ids, None)
        state = self.known.get(key, _NOT_FETCHED)
        if key in self.new:
            assert isinstance(state, dict)
            if matches(state, condition):
                self._apply(key, state, change, inserting=False)
            elif upsert:
                _duplicate(collision)
        elif state is ABSENT:
            if not upsert:
                return  # nothing to change
            if any(not name.startswith("$") for name in condition):
                raise Unsupported("an upsert that copies fields from its condition")
            document: dict[str, Any] = {"_id": ids}
            apply_change(document, change, inserting=True)
            self._create(key, document)
        elif state is _NOT_FETCHED:  # no decision reads it: the server applies the write
            if upsert and condition:
                raise Unsupported("a conditional upsert of a document that was not fetched")
            self._send(key, selector, change, upsert=upsert, certain=not condition)
        else:
            assert isinstance(state, dict)
            self._update_stored(key, state, selector, change, upsert=upsert, collision=collision)

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
        key = (collection, doc_id)
        state = self._fetched(key)
        value = {**record, FINGERPRINT: fingerprint}
        if state is ABSENT:
            document: dict[str, Any] = {"_id": doc_id}
            apply_change(document, _claiming(slot, value, created), inserting=True)
            self._create(key, document)
            return True
        if not slot:
            return bool(state.get(FINGERPRINT, fingerprint) == fingerprint)
        if reached(state, slot):  # taken: by this record (a redelivery) or another
            return bool(_slot_holder(state, slot).get(FINGERPRINT, fingerprint) == fingerprint)
        taking = {"$set": {slot: value}}
        if key in self.new:
            self._apply(key, state, taking, inserting=False)
        else:
            before = copy.deepcopy(state)
            apply_change(state, taking, inserting=False)
            selector = {"_id": doc_id, slot: {"$exists": False}}
            change = _claiming(slot, value, created)
            self._send(key, selector, change, upsert=True, certain=True, before=before)
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
        key = (collection, doc_id)
        state = self._fetched(key)
        failed = {f"{slot}.failure": {"$exists": True, "$ne": None}}
        if state is not ABSENT and matches(state, failed):
            replacing = {"$set": {slot: {**record, FINGERPRINT: fingerprint}}}
            if key in self.new:
                self._apply(key, state, replacing, inserting=False)
            else:
                before = copy.deepcopy(state)
                apply_change(state, replacing, inserting=False)
                self._send(key, {"_id": doc_id, **failed}, replacing, certain=True, before=before)
        return self.claim(collection, doc_id, slot, record, fingerprint, created=created)

    def link_turn(self, turn_id: str) -> None:
        snapshot = self.listing.get(turn_id)
        if snapshot is None:  # a stored snapshot's, or none yet: looked up after the writes
            self.unlinked[turn_id] = None
            return
        self.update(TURNS, {"_id": turn_id}, {"$set": {"snapshot_id": snapshot}})

    def delete(self, collection: str, selector: dict[str, Any]) -> int:
        raise Unsupported("an erasure inside a run (the batch projects erasures on their own)")

    def ids(self, collection: str, selector: dict[str, Any], field: str = "_id") -> list[Any]:
        raise Unsupported("a read inside a run (the batch projects erasures on their own)")

    # -- what the batch holds --------------------------------------------------------------------

    def _fetched(self, key: Key) -> dict[str, Any] | None:
        state = self.known.get(key, _NOT_FETCHED)
        if state is _NOT_FETCHED:
            raise Unsupported(f"a decision about {key!r}, which was not fetched")
        return state  # type: ignore[no-any-return]

    def _create(self, key: Key, document: dict[str, Any]) -> None:
        self.known[key] = document
        self.new.add(key)
        queued = Queued(key[0], key, insert=True)
        self.queues.setdefault(key[0], []).append(queued)
        self.last[key] = queued
        self._note_turns(key, document)

    def _apply(
        self, key: Key, document: dict[str, Any], change: dict[str, Any], *, inserting: bool
    ) -> None:
        apply_change(document, change, inserting=inserting)
        self._note_turns(key, document)

    def _note_turns(self, key: Key, document: dict[str, Any]) -> None:
        """A snapshot of this batch listing turns: turns projected after it link to it."""
        if key[0] == SNAPSHOTS and isinstance(document.get("turn_ids"), list):
            for turn_id in document["turn_ids"]:
                self.listing.setdefault(turn_id, key[1])

    def _update_listed(
        self,
        collection: str,
        ids: list[Any],
        condition: dict[str, Any],
        change: dict[str, Any],
        *,
        upsert: bool,
    ) -> None:
        """An update of the documents listed by id: new ones in memory, the rest sent."""
        if upsert:
            raise Unsupported("an upsert of many documents")
        rest: list[Any] = []
        for doc_id in dict.fromkeys(ids):
            key = (collection, doc_id)
            if collection == TURNS:
                self.unlinked.pop(doc_id, None)
            state = self.known.get(key)
            if key in self.new and isinstance(state, dict):
                if matches(state, condition):
                    self._apply(key, state, change, inserting=False)
                continue
            fetched = self.tracked.get(collection, frozenset())
            if isinstance(state, dict) and _touches(change, fetched):
                if not all(covered(path, fetched) for path in condition_paths(condition)):
                    raise Unsupported("a condition on fields of many documents not fetched")
                if matches(state, condition):
                    apply_change(state, change, inserting=False)
            rest.append(doc_id)
        if rest:
            queued = Queued(
                collection, None, {"_id": {"$in": rest}, **condition}, change, many=True
            )
            self.queues.setdefault(collection, []).append(queued)
            for doc_id in rest:
                self.last[(collection, doc_id)] = queued

    def _update_stored(
        self,
        key: Key,
        state: dict[str, Any],
        selector: dict[str, Any],
        change: dict[str, Any],
        *,
        upsert: bool,
        collision: str | None,
    ) -> None:
        condition = {name: value for name, value in selector.items() if name != "_id"}
        fetched = self.tracked.get(key[0], frozenset())
        if not all(covered(path, fetched) for path in condition_paths(condition)):
            if upsert or _touches(change, fetched):
                raise Unsupported(f"a condition on fields of {key!r} that were not fetched")
            self._send(key, selector, change)  # the server decides
            return
        if not matches(state, condition):
            if upsert:
                _duplicate(collision)
            return  # matches nothing: nothing to send
        if (upsert and set(change) == {"$setOnInsert"}) or _unchanged(state, change, fetched):
            return  # the document exists and holds it already: nothing to set
        before = copy.deepcopy(state)
        apply_change(state, change, inserting=False)
        self._note_turns(key, state)
        self._send(key, selector, change, upsert=upsert, certain=True, before=before)

    def _send(
        self,
        key: Key,
        selector: dict[str, Any],
        change: dict[str, Any],
        *,
        upsert: bool = False,
        certain: bool = False,
        before: dict[str, Any] | None = None,
    ) -> None:
        """Queue an update of `key`, folded into the one queued before it when that changes
        nothing; `before`: the fetched fields as they stood just before it (decided writes)."""
        previous = self.last.get(key)
        if certain and previous is not None and folded(previous, selector, change, upsert):
            return
        queued = Queued(key[0], key, selector, change, upsert=upsert, certain=certain)
        queued.before = before
        queued.fields = self.tracked.get(key[0], frozenset())
        self.queues.setdefault(key[0], []).append(queued)
        self.last[key] = queued


_NOT_FETCHED: Any = object()


def listed(ids: Any) -> list[Any]:
    """The ids of a condition that is exactly `{"$in": [...]}`."""
    if isinstance(ids, Mapping) and list(ids) == ["$in"]:
        return list(ids["$in"])
    raise Unsupported("a many-document update not by a list of ids")


def _duplicate(collision: str | None) -> None:
    """An upsert whose condition fails on an existing document: the live write's duplicate key."""
    if collision is None:
        raise Unsupported("a duplicate key the projection gave no collision message for")
    raise IdCollision(collision)


def _claiming(slot: str, value: dict[str, Any], created: dict[str, Any] | None) -> dict[str, Any]:
    """The change a live claim sends (`projections.writes`)."""
    if not slot:
        return {"$setOnInsert": {**(created or {}), **value}}
    change: dict[str, Any] = {"$set": {slot: value}}
    if created:
        change["$setOnInsert"] = created
    return change


def _slot_holder(document: dict[str, Any], slot: str) -> dict[str, Any]:
    """What a claimed slot holds, read as the live claim reads it."""
    held: Any = document
    for part in slot.split("."):
        held = held.get(part) or {}
    return held if isinstance(held, dict) else {}


def _unchanged(state: dict[str, Any], change: dict[str, Any], fetched: frozenset[str]) -> bool:
    """A change that only sets fetched fields to the values they hold (a redelivery's)."""
    return set(change) == {"$set"} and all(
        covered(path, fetched) and [normal(v) for v in reached(state, path)] == [normal(value)]
        for path, value in change["$set"].items()
    )


def _touches(change: dict[str, Any], fetched: frozenset[str] | None) -> bool:
    return bool(fetched) and any(
        overlapping(path, field) for path in changed_paths(change) for field in fetched or ()
    )
