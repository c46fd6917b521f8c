"""The keys one process holds in memory, so sealing a turn costs no database round trip
(docs/forgetting-encryption.md, "The cache").

Entries live for `ttl` and at most `size` of them are kept (least recently used first out).
A key destroyed by this process is remembered as destroyed, and every answer is checked against
that list under the same lock the destroy takes: once `forget` returns, no call returns the
material of those keys, including one that read the key's document just before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from handlers.ports import KeyRecord
from handlers.sealing import DataKey, KeyScope

Subject = tuple[KeyScope, str, str | None]
"""(scope, owner, subject): what a current key seals."""


@dataclass(frozen=True)
class _Entry:
    key: DataKey
    record: KeyRecord
    until: datetime


class KeyCache:
    """Live keys by id, the current key of each subject, and the ids destroyed here."""

    def __init__(self, clock: Callable[[], datetime], *, ttl: timedelta, size: int) -> None:
        self._clock = clock
        self._ttl = ttl
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._current: dict[Subject, str] = {}
        self._destroyed: set[str] = set()

    def key(self, key_id: str) -> tuple[bool, DataKey | None]:
        """(True, the key or None once destroyed) when known here; (False, None) otherwise."""
        with self._lock:
            if key_id in self._destroyed:
                return True, None
            entry = self._entries.get(key_id)
            if entry is not None and entry.until > self._clock():
                self._entries.move_to_end(key_id)
                return True, entry.key
            return False, None

    def current(self, subject: Subject) -> DataKey | None:
        """The live current key of `subject`, if held here."""
        with self._lock:
            key_id = self._current.get(subject)
            entry = self._entries.get(key_id) if key_id is not None else None
            if entry is None or entry.until <= self._clock() or key_id in self._destroyed:
                return None
            self._entries.move_to_end(entry.key.key_id)
            return entry.key

    def remember(
        self, record: KeyRecord, material: bytes | None, *, current: bool
    ) -> DataKey | None:
        """The live key read from the store (None when destroyed), kept — unless this process
        destroyed it meanwhile; a destroyed key is remembered so no lookup repeats it."""
        with self._lock:
            if material is None:
                self._destroyed.add(record.key_id)
                return None
            if record.key_id in self._destroyed:
                return None
            key = DataKey(record.key_id, bytes(material))
            self._entries[record.key_id] = _Entry(key, record, self._clock() + self._ttl)
            self._entries.move_to_end(record.key_id)
            if current:
                self._current[(record.scope, record.owner, record.subject)] = record.key_id
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
            return key

    def forget(self, key_ids: set[str]) -> None:
        """`key_ids` are destroyed: never answered from here again."""
        with self._lock:
            self._destroyed |= key_ids
            for key_id in key_ids:
                entry = self._entries.pop(key_id, None)
                if entry is not None:
                    subject = (entry.record.scope, entry.record.owner, entry.record.subject)
                    if self._current.get(subject) == key_id:
                        del self._current[subject]
