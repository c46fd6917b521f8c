"""The SDK's data keys: sealing what it writes, opening what it reads from the log
(docs/architecture.md, "Crypto-shredding").

The keys live in the `data_keys` collection of the configured database, opened on first use
with the synchronous driver (`memstream.keystore.mongo`); lookups run in a thread
(`with_keys`), and a key the process holds seals a turn with no database round trip.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pymongo.database import Database

from events.codec import AnyEvent, encode
from handlers.key_ring import StoreKeyRing, with_keys
from handlers.sealed_events import sealer
from memstream.config import Settings
from memstream.keystore.mongo import MongoDataKeys
from memstream.keystore.wrapping import LocalMasterKeys, read_master_keys
from streams.settings import Clock

MASTER_KEY_FILE = "master.key"
"""The master key file in the data directory (`memstream up` creates it)."""


def master_key_path(settings: Settings) -> Path | None:
    """The master key file this process wraps data keys with: the configured one, else the
    data directory's when it exists, else None (data keys stored unwrapped)."""
    if settings.memory.master_key_file is not None:
        return settings.memory.master_key_file
    default = settings.data_dir / MASTER_KEY_FILE
    return default if default.exists() else None


def key_wrapper(settings: Settings) -> LocalMasterKeys | None:
    """The master keys of `master_key_path` (a configured file that cannot be read is a
    `ValueError` naming it)."""
    path = master_key_path(settings)
    return read_master_keys(path) if path is not None else None


def data_key_store(db: Database[dict[str, Any]], settings: Settings, clock: Clock) -> MongoDataKeys:
    """The data keys on `db`, wrapped with this process's master keys."""
    return MongoDataKeys(db, clock=clock, wrapper=key_wrapper(settings))


class ClientKeys:
    """The key ring of one client (shared with its `acting_as` views)."""

    def __init__(self, settings: Settings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._client: Any = None
        self._ring: StoreKeyRing | None = None

    @property
    def sealing(self) -> bool:
        return self._settings.memory.seal_content

    def ring(self) -> StoreKeyRing:
        """The key ring over the configured database (opened on first use)."""
        if self._ring is None:
            from pymongo import MongoClient

            uri = self._settings.mongodb.uri
            if not uri:
                raise ValueError(
                    "MEMSTREAM_SEAL_CONTENT needs MONGODB_URI: the data keys live in MongoDB "
                    "(is `memstream up` running? or set MEMSTREAM_SEAL_CONTENT=false)"
                )
            self._client = MongoClient(uri, tz_aware=True, socketTimeoutMS=30_000)
            database = self._client[self._settings.mongodb.keys_database_name]
            store = data_key_store(database, self._settings, self._clock)
            self._ring = StoreKeyRing(store)
        return self._ring

    def ring_if_configured(self) -> StoreKeyRing | None:
        """The ring when a database is configured (for reading: plaintext needs none)."""
        return self.ring() if self._settings.mongodb.uri else None

    async def encode(self, event: AnyEvent) -> bytes:
        """The event's record: its content sealed when sealing is on."""
        if not self.sealing:
            return encode(event)
        ring = self.ring()
        return await with_keys(lambda: encode(event, sealer(ring)))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
            self._ring = None
