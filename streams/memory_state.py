"""The memories a stage knows, kept in its Faust table so reconciliation sees its own decisions.

Read-your-writes (docs/architecture.md, "Reconciliation"): two snapshots of one user arriving
back to back must not both ADD the same fact, even when MongoDB has not projected the first
one's decisions yet. So each memory type's stage keeps the current memories of its type as
state of its own, changed only by `handlers.reconcile.evolve` applied to the decisions it wrote
(or read back from its own output after a crash) — the same events the projector expands.

Table keys (all written while processing the user's partition, so a user's state lives in the
partition that carries the user's snapshots):

* `\\x00m|<user>|<memory id>` → one current memory (`KnownMemory`, with its vector);
* `\\x00i|<user>` → the ids of the user's current memories of this type (any agent);
* `\\x00s|<user>` → the ids of the user's latest direct saves (`RECENT_SAVES_REMEMBERED`), so a
  save request sent twice is reconciled once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import orjson

from handlers.reconcile import KnownMemory, KnownMemoryFacts
from handlers.sealed_events import (
    KeyRing,
    NoKeyStore,
    open_known_memory,
    seal_known_memory,
    sealed_key_ids,
)
from handlers.sealing import KeyDestroyed

RECENT_SAVES_REMEMBERED = 64
NEVER_EXPIRES = b'"expires_at":null'
"""How a stored memory without an expiry reads (`KnownMemory.model_dump_json`)."""


def _memory_key(user_id: str, memory_id: str) -> bytes:
    return f"\x00m|{user_id}|{memory_id}".encode()


def _index_key(user_id: str) -> bytes:
    return f"\x00i|{user_id}".encode()


def _saves_key(user_id: str) -> bytes:
    return f"\x00s|{user_id}".encode()


class KnownMemories:
    """The current memories of one memory type, per user, in a stage's table.

    With `keys`, a memory's content and vector are stored sealed with the memory's key
    (`handlers.sealed_events.seal_known_memory`; `seal` says whether to seal what is stored,
    and sealed values are opened whatever it says). Forgetting and expiry read what they need
    without opening anything (`KnownMemoryFacts`); reconciliation parses the user's memories
    once (`stored`), loads their keys, opens them, and passes over a memory whose key
    was destroyed: it is being forgotten."""

    def __init__(
        self,
        table: MutableMapping[bytes, bytes | None],
        keys: KeyRing | None = None,
        *,
        seal: bool = False,
    ) -> None:
        self._table = table
        self._keys = keys
        self._seal = seal and keys is not None

    def stored(self, user_id: str) -> StoredMemories:
        """The user's stored memories, parsed once: load `key_ids`, then open them (`opened`)."""
        payloads = []
        for memory_id in self._ids(user_id):
            stored = self._table.get(_memory_key(user_id, memory_id))
            if stored:
                payloads.append(orjson.loads(stored))
        return StoredMemories(payloads, opener_of_known(self._keys))

    def expiring(self) -> list[KnownMemoryFacts]:
        """The memories this worker holds (its partitions' users) whose current version has an
        expiry, for the expiry timer. A memory stored as never expiring is passed over without
        parsing it (its vector makes that the cost of a scan): `store` writes compact JSON."""
        return [
            KnownMemoryFacts.model_validate_json(stored)
            for key, stored in list(self._table.items())
            if stored and key.startswith(b"\x00m|") and NEVER_EXPIRES not in stored
        ]

    def all_of(self, user_id: str) -> list[KnownMemoryFacts]:
        """The user's current memories of this type, every scope (without their content)."""
        stored = (
            self._table.get(_memory_key(user_id, memory_id)) for memory_id in self._ids(user_id)
        )
        return [KnownMemoryFacts.model_validate_json(memory) for memory in stored if memory]

    def forget(self, user_id: str, memory_ids: Collection[str]) -> None:
        """Erase `memory_ids` from the user's memories (the table's changelog gets tombstones)."""
        ids = self._ids(user_id)
        for memory_id in memory_ids:
            key = _memory_key(user_id, memory_id)
            if self._table.get(key) is not None:
                del self._table[key]
        kept = [memory_id for memory_id in ids if memory_id not in memory_ids]
        if len(kept) != len(ids):
            self._table[_index_key(user_id)] = orjson.dumps(kept)

    def store(
        self, user_id: str, before: Mapping[str, KnownMemory], after: Mapping[str, KnownMemory]
    ) -> None:
        """Write what changed from `before` to `after` (one scope of the user)."""
        changed = [m for memory_id, m in after.items() if before.get(memory_id) != m]
        for memory in changed:
            self._table[_memory_key(user_id, memory.memory_id)] = self._stored(memory)
        ids = self._ids(user_id)
        new_ids = [memory_id for memory_id in after if memory_id not in ids]
        if new_ids:
            self._table[_index_key(user_id)] = orjson.dumps([*ids, *new_ids])

    def saved_before(self, user_id: str, save_id: str) -> bool:
        return save_id in self._recent_saves(user_id)

    def remember_save(self, user_id: str, save_id: str) -> None:
        recent = [*self._recent_saves(user_id), save_id][-RECENT_SAVES_REMEMBERED:]
        self._table[_saves_key(user_id)] = orjson.dumps(recent)

    def _stored(self, memory: KnownMemory) -> bytes:
        payload = memory.model_dump(mode="json")
        if self._seal and self._keys is not None and memory.user_id:
            payload = seal_known_memory(payload, self._keys)
        return orjson.dumps(payload)

    def _ids(self, user_id: str) -> list[str]:
        stored = self._table.get(_index_key(user_id))
        return list(orjson.loads(stored)) if stored else []

    def _recent_saves(self, user_id: str) -> list[str]:
        stored = self._table.get(_saves_key(user_id))
        return list(orjson.loads(stored)) if stored else []


@dataclass(frozen=True)
class StoredMemories:
    """A user's stored memories as parsed from the table, not opened yet."""

    payloads: list[dict[str, Any]]
    opener: Callable[[dict[str, Any]], dict[str, Any]]

    @property
    def key_ids(self) -> set[str]:
        """The data keys they are sealed with (to load them with one query)."""
        return set().union(*(sealed_key_ids(payload) for payload in self.payloads))

    def opened(self, agent_id: str | None) -> dict[str, KnownMemory]:
        """Those in the scope of `agent_id`, opened; a memory whose key was destroyed is passed
        over (it is being forgotten). Opening works in place and an opened value stays open, so
        a call repeated after a key was fetched (`with_keys`) redoes only what is left."""
        memories: dict[str, KnownMemory] = {}
        for payload in self.payloads:
            try:
                memory = KnownMemory.model_validate(self.opener(payload))
            except KeyDestroyed:
                continue
            if memory.agent_id == agent_id:
                memories[memory.memory_id] = memory
        return memories


def opener_of_known(keys: KeyRing | None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """What opens a stored memory: with keys, `open_known_memory`; without, sealed content is
    an outage (`NoKeyStore`) and plaintext passes."""
    if keys is not None:
        return lambda payload: open_known_memory(payload, keys)

    def refuse(payload: dict[str, Any]) -> dict[str, Any]:
        if sealed_key_ids(payload):
            raise NoKeyStore(f"memory {payload.get('memory_id')} is sealed; no key store")
        return payload

    return refuse
