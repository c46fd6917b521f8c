"""The keys a stage reads and writes sealed content with (docs/architecture.md,
"Crypto-shredding"): a thin wiring of `handlers.sealed_events` to the key store.

Opening and sealing are pure and cheap once a key is in memory; a key that is not is looked up
in a thread and the step is tried again (`handlers.key_ring.with_keys`), so the stage's
event loop never waits on MongoDB.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from events.codec import AnyEvent, encode
from handlers.key_ring import StoreKeyRing
from handlers.key_ring import with_keys as _with_keys
from handlers.sealed_events import (
    KeyRing,
    NoKeyStore,
    has_sealed_turns,
    open_window,
    seal_window,
    sealer,
    without_sealed_turns,
)
from handlers.session_window import SessionWindow
from streams.retrying import through_outages

T = TypeVar("T")
Read = Callable[[bytes | None, bytes | None, KeyRing | None], T]


async def with_keys(work: Callable[[], T]) -> T:
    """`handlers.key_ring.with_keys`, its key lookups waited out through a database outage
    (`streams.retrying`): a key looked up while MongoDB is down retries, it never crashes the
    stage's agent."""
    return await through_outages(lambda: _with_keys(work), "looking up a data key")


@dataclass(frozen=True)
class StageKeys:
    """A stage's key ring (None: no key store, so sealed input waits with `NoKeyStore`) and
    whether it seals what it writes."""

    ring: StoreKeyRing | None = None
    seal: bool = False

    def __post_init__(self) -> None:
        if self.seal and self.ring is None:
            raise ValueError("sealing content needs a key store (MONGODB_URI)")

    async def read(self, read: Read[T], key: bytes | None, value: bytes | None) -> T:
        """`read(key, value, ring)` — one of `handlers.inputs`' readers — with its keys."""
        return await with_keys(lambda: read(key, value, self.ring))

    async def encode(self, event: AnyEvent) -> bytes:
        """The event's record, its content sealed when this stage seals."""
        if not self.seal or self.ring is None:
            return encode(event)
        ring = self.ring
        return await with_keys(lambda: encode(event, sealer(ring)))

    async def stored_window(self, stored: bytes) -> SessionWindow:
        """A window as the table holds it, its pending turns opened (`KeyDestroyed`: its
        session was forgotten)."""
        ring = self.ring
        if ring is None:
            return SessionWindow.model_validate(_no_sealed_turns(orjson.loads(stored)))
        return await with_keys(
            lambda: SessionWindow.model_validate(open_window(orjson.loads(stored), ring))
        )

    async def window_to_store(self, window: SessionWindow) -> bytes:
        """A window as the table keeps it: its pending turns sealed when this stage seals."""
        if not self.seal or self.ring is None:
            return window.model_dump_json().encode()
        ring = self.ring
        return await with_keys(
            lambda: orjson.dumps(seal_window(window.model_dump(mode="json"), ring))
        )


def window_facts(stored: bytes) -> SessionWindow:
    """A stored window without its sealed turns' content: for what needs no content (the idle
    timer, forgetting a user's windows)."""
    return SessionWindow.model_validate(without_sealed_turns(orjson.loads(stored)))


def _no_sealed_turns(payload: dict[str, Any]) -> dict[str, Any]:
    if has_sealed_turns(payload):
        raise NoKeyStore("a stored window holds sealed turns and this stage has no key store")
    return payload


NO_KEYS = StageKeys()
"""A stage with no key store that writes plaintext (tests and benchmarks without MongoDB)."""
