"""The keys a stage reads and writes sealed content with (docs/architecture.md,
"Crypto-shredding"): a thin wiring of `handlers.sealed_events` to the key store.

Opening and sealing are pure and cheap once a key is in memory; a key that is not is looked up
in a thread and the step is tried again (`projections.data_keys.with_keys`), so the stage's
event loop never waits on MongoDB.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from events.codec import AnyEvent, encode
from handlers.sealed_events import KeyRing, sealer
from projections.data_keys import StoreKeyRing, with_keys

T = TypeVar("T")
Read = Callable[[bytes | None, bytes | None, KeyRing | None], T]


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


NO_KEYS = StageKeys()
"""A stage with no key store that writes plaintext (tests and benchmarks without MongoDB)."""
