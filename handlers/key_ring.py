"""A `handlers.sealed_events.KeyRing` over a key store (`handlers.ports.DataKeys`), and the loop
that lets async code seal and open without waiting on the store (docs/architecture.md,
"Crypto-shredding").

Sealing and opening are pure and cheap once a key is in memory. A non-blocking ring answers from
memory only and raises `KeyNotCached` carrying the lookup to run; `with_keys` runs that lookup
in a thread and tries the step again, so an event loop never waits on the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from handlers.ports import DataKeys
from handlers.sealed_events import KeyNotCached
from handlers.sealing import DataKey, KeyScope

T = TypeVar("T")


class StoreKeyRing:
    """The `KeyRing` over a `DataKeys` store.

    `blocking=False` answers from the store's memory only and raises `KeyNotCached` with the
    lookup to run (in a thread, `with_keys`); `blocking=True` looks keys up itself (for code
    already off the event loop: threads, the CLI, replay)."""

    def __init__(self, store: DataKeys, *, blocking: bool = False) -> None:
        self.store = store
        self.blocking = blocking

    def sealing_key(self, scope: KeyScope, owner: str, subject: str | None) -> DataKey:
        if not self.blocking and (key := self.store.cached_current(scope, owner, subject)):
            return key
        if self.blocking:
            return self.store.current(scope, owner, subject)
        raise KeyNotCached(
            f"the {scope} key of {owner!r} {subject or ''}".rstrip(),
            partial(self.store.current, scope, owner, subject),
        )

    def opening_key(self, key_id: str) -> DataKey | None:
        known, key = self.store.cached_key(key_id)
        if known:
            return key
        if self.blocking:
            return self.store.key(key_id)
        raise KeyNotCached(f"data key {key_id}", partial(self.store.key, key_id))

    def in_threads(self) -> StoreKeyRing:
        """The same store, looking keys up itself."""
        return StoreKeyRing(self.store, blocking=True)


async def with_keys(work: Callable[[], T]) -> T:
    """`work()` — a pure sealing or opening over a non-blocking `StoreKeyRing` — retried after
    each key it misses is looked up in a thread, so the event loop never waits on the store."""
    while True:
        try:
            return work()
        except KeyNotCached as missing:
            await asyncio.to_thread(missing.fetch)
