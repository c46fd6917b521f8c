"""The data keys that seal event content, in their own collection (`data_keys`); forgetting
destroys them (crypto-shredding, docs/forgetting-encryption.md).

The MongoDB implementation of the `handlers.ports.DataKeys` port (the other is
`memstream.keystore.in_memory`; both are held to one contract). Keys are not a read model: they
are not derived from the log, `replay` does not rebuild them, and losing this collection loses
the content of the whole log (back it up apart from the read model, and think about what a
restored backup resurrects: docs/forgetting-encryption.md, "Backups").

A document::

    {_id: key id, scope: "session" | "memory" | "user", owner: user id,
     subject: session id | memory id | None, generation: 1, 2, …,
     wrapped: Binary (the material under a key-encryption key), kek: its id
     (both absent once destroyed; a store without a `KeyWrapper` writes `material: Binary(32)`
     instead), created_at, destroyed_at (None while live)}

**Wrapped material.** With a `KeyWrapper` (`memstream.keystore.wrapping`) the material never
reaches the database in the clear: a dump of this collection without the master key opens
nothing.
Documents written unwrapped stay readable; `rewrap` wraps them, and moves documents wrapped by
an older master key to the current one (rotation: the data keys, and so the log, stay as they
are).

**Race-safe creation.** The key id is a function of (scope, owner, subject, generation)
(`handlers.sealing.data_key_id`), and a key is created by an upsert of that id whose random
material is written with `$setOnInsert`: two processes creating the same key at once write one
document, and both read back the material of whichever insert won. (A plain insert of a random
id would leave two keys for one session, and half of its turns under each.)

**Generations.** Destroying a key keeps its document (no material, `destroyed_at` set) as the
record that it existed and when it died. Content recorded afterwards under the same subject — a
session id used again after the session was forgotten — is new data: `current` creates the
next generation, with new material, so a destroyed generation is never revived (its id is taken
by its tombstone).

**The cache.** Sealing a turn must not cost a database round trip, so keys are cached in the
process for `cache_ttl` (`memstream.keystore.cache`). Within the process, `destroy` evicts the
keys it destroys and remembers their ids, so once `destroy` returns no call of this store
returns their material — including a lookup that read the document just before the destroy.
Across processes the cache is a window: another process that read a key before it was destroyed
keeps using it for up to `cache_ttl` — it can still open that content (which the read models no
longer hold, see the design note), and content it *seals* in that window under the destroyed
key is lost with it (over-forgetting, never under-forgetting). A shorter TTL shortens the window
and costs a lookup per key per TTL.

Synchronous pymongo, like the projections; async callers use `asyncio.to_thread`. Times come
from the `clock` passed in; key material from `random_material` (`os.urandom`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pymongo import ASCENDING, DESCENDING, IndexModel, ReturnDocument, UpdateOne
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from events.sealed import KEY_BYTES
from handlers.ports import KeyRecord
from handlers.sealing import (
    KEY_SCOPES,
    DataKey,
    KeyScope,
    UnknownKey,
    check_subject,
    data_key_id,
)
from memstream.keystore.cache import KeyCache
from memstream.keystore.wrapping import KekUnavailable, KeyWrapper

__all__ = ["DATA_KEYS", "MongoDataKeys", "Rewrapped", "UnknownKey"]

DATA_KEYS = "data_keys"
Document = dict[str, Any]
Clock = Callable[[], datetime]
DEFAULT_CACHE_TTL = timedelta(seconds=30)
DEFAULT_CACHE_SIZE = 10_000
"""Keys kept per process: one per open session a worker seals or opens, one per memory."""
_CREATE_ATTEMPTS = 8
"""Generations `current` tries before giving up: each retry means a concurrent `destroy` killed
the generation it had just created; more than a few in a row is a bug, not a race."""

INDEXES = [
    IndexModel(
        [
            ("owner", ASCENDING),
            ("scope", ASCENDING),
            ("subject", ASCENDING),
            ("generation", DESCENDING),
        ],
        name="owner_scope_subject_generation",
    )
]


def _record_of(document: Document) -> KeyRecord:
    return KeyRecord(
        key_id=document["_id"],
        scope=document["scope"],
        owner=document["owner"],
        subject=document.get("subject"),
        generation=int(document["generation"]),
        created_at=document["created_at"],
        destroyed_at=document.get("destroyed_at"),
        kek=document.get("kek") if _live(document) else None,
    )


def _live(document: Document) -> bool:
    """Whether a key document still holds material (wrapped or not)."""
    return "wrapped" in document or "material" in document


LIVE = {"$or": [{"wrapped": {"$exists": True}}, {"material": {"$exists": True}}]}
"""The query for documents `_live` is true of."""


@dataclass(frozen=True)
class Rewrapped:
    """What `rewrap` did: keys moved to the current master key, by where they came from
    (`plain` for unwrapped ones), and those a concurrent change (a destroy) kept it from."""

    moved: dict[str, int]
    skipped: int


def _random_material() -> bytes:
    return os.urandom(KEY_BYTES)


class MongoDataKeys:
    """The `data_keys` collection of `db`, with a per-process cache."""

    def __init__(
        self,
        db: Database[Document],
        *,
        clock: Clock,
        random_material: Callable[[], bytes] = _random_material,
        cache_ttl: timedelta = DEFAULT_CACHE_TTL,
        cache_size: int = DEFAULT_CACHE_SIZE,
        wrapper: KeyWrapper | None = None,
    ) -> None:
        self._keys: Collection[Document] = db[DATA_KEYS]
        self._wrapper = wrapper
        self._clock = clock
        self._random_material = random_material
        self._cache = KeyCache(clock, ttl=cache_ttl, size=cache_size)
        self._indexed = False

    def prepare(self) -> None:
        """Create the collection's index (idempotent). `current` does it once per process
        before it first looks a key up by its subject: without it, every new session's key
        creation scans the whole collection (BENCHMARKS.md, "Encryption")."""
        self._keys.create_indexes(INDEXES)
        self._indexed = True

    # ---- reading and creating ------------------------------------------------------------------

    def current(self, scope: KeyScope, owner: str, subject: str | None = None) -> DataKey:
        """The live key that seals new content of `scope` for `owner` and `subject` (a session or
        memory id; None for the user scope): the newest generation, created when there is none
        or the newest was destroyed."""
        check_subject(scope, subject)
        if (cached := self._cache.current((scope, owner, subject))) is not None:
            return cached
        if not self._indexed:
            self.prepare()
        for _ in range(_CREATE_ATTEMPTS):
            newest = self._keys.find_one(
                {"owner": owner, "scope": scope, "subject": subject},
                sort=[("generation", DESCENDING)],
            )
            if newest is not None and _live(newest):
                found = self._remembered(newest, current=True)
            else:
                generation = 1 if newest is None else int(newest["generation"]) + 1
                found = self._remembered(
                    self._created(scope, owner, subject, generation), current=True
                )
            if found is not None:
                return found
        raise RuntimeError(
            f"no live {scope} key for {owner!r} {subject!r} after {_CREATE_ATTEMPTS} generations"
        )

    def key(self, key_id: str) -> DataKey | None:
        """The key `key_id` names, or None when it was destroyed (its content is forgotten).
        `UnknownKey` when no such key was ever stored."""
        known, key = self._cache.key(key_id)
        if known:
            return key
        document = self._keys.find_one({"_id": key_id})
        if document is None:
            raise UnknownKey(f"no data key {key_id} in this key store")
        return self._remembered(document, current=False)

    def load(self, key_ids: Iterable[str]) -> None:
        """Bring every key of `key_ids` this process does not know into its cache, with one
        query (`UnknownKey` for an id the store never held)."""
        missing = [key_id for key_id in set(key_ids) if not self.cached_key(key_id)[0]]
        if not missing:
            return
        found = {
            document["_id"]: document for document in self._keys.find({"_id": {"$in": missing}})
        }
        for key_id in missing:
            if key_id not in found:
                raise UnknownKey(f"no data key {key_id} in this key store")
            self._remembered(found[key_id], current=False)

    def cached_key(self, key_id: str) -> tuple[bool, DataKey | None]:
        """(True, the key or None once destroyed) when this process knows the answer for
        `key_id` without a lookup; (False, None) when `key` must ask the database."""
        return self._cache.key(key_id)

    def cached_current(self, scope: KeyScope, owner: str, subject: str | None) -> DataKey | None:
        """The live key `current` would answer, if this process holds it (else None)."""
        return self._cache.current((scope, owner, subject))

    def records(self, owner: str) -> list[KeyRecord]:
        """Every key of `owner`, live and destroyed, without material (for audits and tests)."""
        found = self._keys.find({"owner": owner}, {"material": 0, "wrapped": 0})
        return sorted(
            (_record_of(document) for document in found),
            key=lambda r: (r.scope, r.subject or "", r.generation),
        )

    def _created(
        self, scope: KeyScope, owner: str, subject: str | None, generation: int
    ) -> Document:
        """Generation `generation`'s document: inserted with fresh material unless another
        process inserted it first (then theirs, whatever state it is in now)."""
        key_id = data_key_id(scope, owner, subject, generation)
        new = {
            "scope": scope,
            "owner": owner,
            "subject": subject,
            "generation": generation,
            **self._stored_material(self._random_material(), key_id),
            "created_at": self._clock(),
            "destroyed_at": None,
        }
        try:
            document = self._keys.find_one_and_update(
                {"_id": key_id},
                {"$setOnInsert": new},
                upsert=True,
                return_document=ReturnDocument.AFTER,
            )
        except DuplicateKeyError:  # MongoDB: two upserts raced to insert; the other one won
            document = None
        if document is None:
            # SecantusDB 0.7 answers an upsert that lost the race with no document at all
            # (tests/memstream/keystore/test_contract.py, the creation race); read the winner's.
            document = self._keys.find_one({"_id": key_id})
        if document is None:
            raise RuntimeError(f"data key {key_id} vanished while it was created")
        return document

    # ---- destroying ----------------------------------------------------------------------------

    def destroy(
        self,
        owner: str,
        scope: KeyScope | None = None,
        subject: str | None = None,
        *,
        created_until: datetime | None = None,
    ) -> tuple[str, ...]:
        """Destroy `owner`'s keys — all of them, or those of one `scope`, or of one `subject` of a
        scope — created at or before `created_until` (all when None): their material is unset,
        `destroyed_at` set. Returns the ids of the live keys this call found and destroyed
        (empty when run again: nothing is left to destroy; a concurrent destroy of the same keys
        may report them too).

        `created_until` is for a request processed after later content was sealed (a replayed
        or late forget request): keys created after it seal new data and must live. It compares
        with `created_at`, the key store's clock, so the bound is only as good as the clocks of
        the processes creating keys and of the request."""
        selector = self._selector(owner, scope, subject, created_until)
        matching = list(self._keys.find(selector, {"_id": 1, "material": 1, "wrapped": 1}))
        live = [document["_id"] for document in matching if _live(document)]
        if live:
            self._keys.update_many(
                {"_id": {"$in": live}, **LIVE},
                {
                    "$unset": {"material": "", "wrapped": ""},
                    "$set": {"destroyed_at": self._clock()},
                },
            )
        self._cache.forget({document["_id"] for document in matching})
        return tuple(sorted(live))

    @staticmethod
    def _selector(
        owner: str, scope: KeyScope | None, subject: str | None, created_until: datetime | None
    ) -> Document:
        selector: Document = {"owner": owner}
        if scope is not None:
            if scope not in KEY_SCOPES:
                raise ValueError(f"unknown key scope {scope!r}")
            selector["scope"] = scope
            if subject is not None:
                check_subject(scope, subject)
                selector["subject"] = subject
        elif subject is not None:
            raise ValueError("a subject is named within a scope")
        if created_until is not None:
            selector["created_at"] = {"$lte": created_until}
        return selector

    # ---- wrapping ------------------------------------------------------------------------------

    def _stored_material(self, material: bytes, key_id: str) -> Document:
        """How new material is stored: wrapped when this store has a wrapper."""
        if self._wrapper is None:
            return {"material": material}
        kek, wrapped = self._wrapper.wrap(material, key_id)
        return {"wrapped": wrapped, "kek": kek}

    def _material(self, document: Document) -> bytes | None:
        """The material a document holds (None once destroyed), unwrapped."""
        if "wrapped" in document:
            if self._wrapper is None:
                raise KekUnavailable(
                    f"data key {document['_id']} is wrapped by master key {document.get('kek')} "
                    "and this process holds no master key: set MEMSTREAM_MASTER_KEY_FILE"
                )
            return self._wrapper.unwrap(
                str(document.get("kek")), bytes(document["wrapped"]), str(document["_id"])
            )
        material = document.get("material")
        return bytes(material) if material is not None else None

    def rewrap(self, batch: int = 500) -> Rewrapped:
        """Wrap every live key with the current master key: the unwrapped ones and those an
        older master key wraps. Each update is conditional on the document being as it was
        read, so a key destroyed meanwhile stays destroyed (counted as skipped)."""
        if self._wrapper is None:
            raise KekUnavailable("rewrapping needs a master key: set MEMSTREAM_MASTER_KEY_FILE")
        current = self._wrapper.current
        moved: dict[str, int] = {}
        skipped = 0
        stale = {**LIVE, "kek": {"$ne": current}}
        pending: list[tuple[Document, Document]] = []
        for document in self._keys.find(stale, {"material": 1, "wrapped": 1, "kek": 1}):
            material = self._material(document)
            assert material is not None  # live by the query
            before = (
                {"wrapped": document["wrapped"], "kek": document.get("kek")}
                if "wrapped" in document
                else {"material": document["material"]}
            )
            after = self._stored_material(material, document["_id"])
            pending.append(({"_id": document["_id"], **before}, after))
            source = str(document.get("kek") or "plain")
            moved[source] = moved.get(source, 0) + 1
            if len(pending) >= batch:
                skipped += self._apply_rewraps(pending)
                pending = []
        if pending:
            skipped += self._apply_rewraps(pending)
        return Rewrapped(moved, skipped)

    def _apply_rewraps(self, rewraps: list[tuple[Document, Document]]) -> int:
        """Apply conditional rewraps in one bulk write; the number a concurrent change refused."""
        result = self._keys.bulk_write(
            [
                UpdateOne(condition, {"$set": after, "$unset": {"material": ""}})
                for condition, after in rewraps
            ],
            ordered=False,
        )
        return len(rewraps) - result.modified_count

    def counts_by_master_key(self) -> dict[str, int]:
        """Live keys by the master key that wraps them (`plain`: unwrapped)."""
        counts: dict[str, int] = {}
        for document in self._keys.find(LIVE, {"kek": 1, "wrapped": 1}):
            name = str(document.get("kek")) if "wrapped" in document else "plain"
            counts[name] = counts.get(name, 0) + 1
        return counts

    # ---- the cache -----------------------------------------------------------------------------

    def _remembered(self, document: Document, *, current: bool) -> DataKey | None:
        """The live key `document` holds (None when destroyed), cached — unless `destroy` in
        this process destroyed it meanwhile (`KeyCache.remember`)."""
        return self._cache.remember(_record_of(document), self._material(document), current=current)
