"""The data keys in this process's memory: the `handlers.ports.DataKeys` port without a
database, for processes that have none (tests, benchmarks of the stages alone) and held to the
same contract as the MongoDB store (tests/memstream/keystore/test_contract.py).

Stores built over one `KeyVault` see the same keys, as processes over one database do: a key
one creates, the others read; a key one destroys is destroyed for all at once (there is no
cache to outlive it). Nothing outlives the vault: when it goes, so does the content sealed
with its keys.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime

from events.sealed import KEY_BYTES
from handlers.ports import KeyRecord
from handlers.sealing import KEY_SCOPES, DataKey, KeyScope, UnknownKey, check_subject, data_key_id


def _random_material() -> bytes:
    return os.urandom(KEY_BYTES)


@dataclass
class KeyVault:
    """The keys themselves: records by id, and the material of the live ones."""

    records: dict[str, KeyRecord] = field(default_factory=dict)
    material: dict[str, bytes] = field(default_factory=dict)
    newest: dict[tuple[KeyScope, str, str | None], str] = field(default_factory=dict)
    """The id of each subject's newest generation."""
    lock: threading.Lock = field(default_factory=threading.Lock)


class InMemoryDataKeys:
    """Data keys in a `KeyVault` (a new one unless shared)."""

    def __init__(
        self,
        vault: KeyVault | None = None,
        *,
        clock: Callable[[], datetime],
        random_material: Callable[[], bytes] = _random_material,
    ) -> None:
        self.vault = vault if vault is not None else KeyVault()
        self._clock = clock
        self._random_material = random_material

    def prepare(self) -> None:
        """Nothing to prepare."""

    def current(self, scope: KeyScope, owner: str, subject: str | None = None) -> DataKey:
        check_subject(scope, subject)
        with self.vault.lock:
            newest = self.vault.newest.get((scope, owner, subject))
            if newest is not None and newest in self.vault.material:
                return DataKey(newest, self.vault.material[newest])
            generation = 1 if newest is None else self.vault.records[newest].generation + 1
            key_id = data_key_id(scope, owner, subject, generation)
            self.vault.records[key_id] = KeyRecord(
                key_id, scope, owner, subject, generation, self._clock(), None
            )
            self.vault.newest[(scope, owner, subject)] = key_id
            material = self.vault.material[key_id] = self._random_material()
            return DataKey(key_id, material)

    def key(self, key_id: str) -> DataKey | None:
        known, key = self.cached_key(key_id)
        if not known:
            raise UnknownKey(f"no data key {key_id} in this key store")
        return key

    def load(self, key_ids: Iterable[str]) -> None:
        for key_id in key_ids:
            self.key(key_id)

    def cached_key(self, key_id: str) -> tuple[bool, DataKey | None]:
        with self.vault.lock:
            if key_id not in self.vault.records:
                return False, None
            material = self.vault.material.get(key_id)
            return True, DataKey(key_id, material) if material is not None else None

    def cached_current(self, scope: KeyScope, owner: str, subject: str | None) -> DataKey | None:
        """Every key is in memory: the current one, unless it must be created first."""
        with self.vault.lock:
            newest = self.vault.newest.get((scope, owner, subject))
            if newest is None or newest not in self.vault.material:
                return None
            return DataKey(newest, self.vault.material[newest])

    def records(self, owner: str) -> list[KeyRecord]:
        with self.vault.lock:
            found = [r for r in self.vault.records.values() if r.owner == owner]
        return sorted(found, key=lambda r: (r.scope, r.subject or "", r.generation))

    def destroy(
        self,
        owner: str,
        scope: KeyScope | None = None,
        subject: str | None = None,
        *,
        created_until: datetime | None = None,
    ) -> tuple[str, ...]:
        if scope is not None and scope not in KEY_SCOPES:
            raise ValueError(f"unknown key scope {scope!r}")
        if scope is None and subject is not None:
            raise ValueError("a subject is named within a scope")
        if scope is not None and subject is not None:
            check_subject(scope, subject)
        now = self._clock()
        destroyed = []
        with self.vault.lock:
            for record in list(self.vault.records.values()):
                if not _selected(record, owner, scope, subject, created_until):
                    continue
                if self.vault.material.pop(record.key_id, None) is not None:
                    self.vault.records[record.key_id] = replace(record, destroyed_at=now)
                    destroyed.append(record.key_id)
        return tuple(sorted(destroyed))


def _selected(
    record: KeyRecord,
    owner: str,
    scope: KeyScope | None,
    subject: str | None,
    created_until: datetime | None,
) -> bool:
    return (
        record.owner == owner
        and (scope is None or record.scope == scope)
        and (subject is None or record.subject == subject)
        and (created_until is None or record.created_at <= created_until)
    )
