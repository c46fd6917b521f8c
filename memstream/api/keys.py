"""API keys: who may call the HTTP API and the MCP server, and as which principal.

A key is shown once, when it is created: ``msk_<key id>_<secret>``. The database keeps the key
id, a SHA-256 of the secret and the grant (`handlers.identity.Grant`): an *application* (explicit
user ids, optionally restricted to a prefix) or a *service account* (its id is the memory user).
Every request looks its key up (no cache), so a revoked key is refused at once.

Why SHA-256 and not a slow password hash (scrypt, argon2): the secret is 32 random bytes from
`secrets`, 256 bits of entropy, so guessing it from its hash is infeasible however fast the hash;
a slow hash protects low-entropy passwords and would cost every request tens of milliseconds.
The comparison is constant-time. See docs/architecture.md, "HTTP API and keys".

Keys are configuration, not memory: they live in their own collection (`api_keys`), are not
derived from the log and are not rebuilt by `memstream replay`.

A key may expire (`expires_at`: refused from then on, like a revoked one) and may be limited to
`rate_limit` requests per minute (`handlers.quotas`): every server process counts a key's
requests of the current minute in one document of `api_key_usage` (removed by a TTL index an
hour later), so the limit holds across processes; the request over it gets `RateLimited`
with the seconds until the next minute.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import TypeAdapter
from pymongo import AsyncMongoClient, ReturnDocument

from events.base import Identifier
from events.turns import Principal
from handlers.identity import Grant, GrantKind
from handlers.quotas import over_rate, rate_window, retry_after
from streams.settings import Clock, utc_now

KEYS = "api_keys"
USAGE = "api_key_usage"
RATE_PERIOD = timedelta(minutes=1)
PREFIX = "msk"
Document = dict[str, Any]
_identifier: TypeAdapter[str] = TypeAdapter(Identifier)


class InvalidKey(ValueError):
    """A key that is malformed, unknown, revoked or expired."""


class RateLimited(RuntimeError):
    """A key made more requests this minute than its limit allows."""

    def __init__(self, key_id: str, limit: int, retry_after: int) -> None:
        super().__init__(
            f"API key {key_id} is limited to {limit} requests a minute; retry in {retry_after} s"
        )
        self.retry_after = retry_after


@dataclass(frozen=True)
class Key:
    """A stored key (never its secret)."""

    key_id: str
    name: str
    grant: Grant
    created_at: datetime
    revoked_at: datetime | None
    ignored_user_ids: int
    expires_at: datetime | None = None
    rate_limit: int | None = None
    """Requests per minute at most (None: no limit)."""

    @classmethod
    def of(cls, document: Document) -> Key:
        kind: GrantKind = (
            "service_account" if document["kind"] == "service_account" else "application"
        )
        principal = Principal(kind=kind, id=document["principal_id"])
        return cls(
            key_id=document["_id"],
            name=document["name"],
            grant=Grant(principal, document.get("user_prefix")),
            created_at=document["created_at"],
            revoked_at=document.get("revoked_at"),
            ignored_user_ids=int(document.get("ignored_user_ids", 0)),
            expires_at=document.get("expires_at"),
            rate_limit=document.get("rate_limit"),
        )

    def described(self) -> Document:
        return {
            "key_id": self.key_id,
            "name": self.name,
            "kind": self.grant.kind,
            "principal_id": self.grant.principal.id,
            "user_prefix": self.grant.user_prefix,
            "created_at": self.created_at.isoformat(),
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "ignored_user_ids": self.ignored_user_ids,
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
            "rate_limit": self.rate_limit,
        }


def _hashed(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split_key(key: str) -> tuple[str, str]:
    """The key id and the secret of ``msk_<key id>_<secret>``."""
    prefix, _, rest = key.partition("_")
    key_id, _, secret = rest.partition("_")
    if prefix != PREFIX or not key_id or not secret:
        raise InvalidKey("not a memstream API key")
    return key_id, secret


class KeyStore:
    """The `api_keys` collection."""

    def __init__(self, uri: str, database: str, *, clock: Clock = utc_now) -> None:
        self._client: AsyncMongoClient[Document] = AsyncMongoClient(uri, tz_aware=True)
        self._keys = self._client[database][KEYS]
        self._usage = self._client[database][USAGE]
        self._usage_indexed = False
        self._clock = clock

    async def close(self) -> None:
        await self._client.close()

    async def create(
        self,
        name: str,
        kind: GrantKind,
        principal_id: str,
        *,
        user_prefix: str | None = None,
        expires_in: timedelta | None = None,
        rate_limit: int | None = None,
    ) -> tuple[str, Key]:
        """A new key for `principal_id`, expiring `expires_in` from now and limited to
        `rate_limit` requests a minute when given; returns the key (shown once) and what is
        stored."""
        _identifier.validate_python(principal_id)
        if expires_in is not None and expires_in <= timedelta(0):
            raise ValueError("a key must live for more than 0 seconds")
        if rate_limit is not None and rate_limit < 1:
            raise ValueError("a rate limit is at least 1 request a minute")
        if kind == "service_account" and user_prefix is not None:
            raise ValueError("a service account acts on its own id: it takes no user prefix")
        if kind == "application" and principal_id in await self.service_accounts():
            raise ValueError(f"{principal_id!r} is a service account")
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        document: Document = {
            "_id": key_id,
            "name": name,
            "kind": kind,
            "principal_id": principal_id,
            "user_prefix": user_prefix,
            "hash": _hashed(secret),
            "created_at": self._clock(),
            "revoked_at": None,
            "ignored_user_ids": 0,
            "expires_at": self._clock() + expires_in if expires_in is not None else None,
            "rate_limit": rate_limit,
        }
        await self._keys.insert_one(document)
        return f"{PREFIX}_{key_id}_{secret}", Key.of(document)

    async def list(self) -> list[Key]:
        return [Key.of(d) async for d in self._keys.find({}, {"hash": 0}).sort("created_at", 1)]

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key; False if there is no such key or it was revoked already."""
        result = await self._keys.update_one(
            {"_id": key_id, "revoked_at": None}, {"$set": {"revoked_at": self._clock()}}
        )
        return result.modified_count == 1

    async def authenticate(self, key: str) -> Key:
        """The live key `key` names, or `InvalidKey`."""
        key_id, secret = split_key(key)
        document = await self._keys.find_one({"_id": key_id})
        if document is None or not hmac.compare_digest(document["hash"], _hashed(secret)):
            raise InvalidKey("unknown API key")
        if document.get("revoked_at") is not None:
            raise InvalidKey("revoked API key")
        found = Key.of(document)
        if found.expires_at is not None and found.expires_at <= self._clock():
            raise InvalidKey("expired API key")
        return found

    async def count_request(self, key: Key) -> None:
        """Count one request of `key` in the current minute; `RateLimited` when it is over the
        key's limit (the refused request is counted too: hammering does not reset it)."""
        if key.rate_limit is None:
            return
        if not self._usage_indexed:
            await self._usage.create_index("expires", expireAfterSeconds=0)
            self._usage_indexed = True
        now = self._clock()
        window = rate_window(now, RATE_PERIOD)
        counted = await self._usage.find_one_and_update(
            {"_id": f"{key.key_id}|{window.name}"},
            {"$inc": {"count": 1}, "$setOnInsert": {"expires": now + timedelta(hours=1)}},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )
        if counted is None:  # SecantusDB may answer a racing upsert with nothing: read it
            counted = await self._usage.find_one({"_id": f"{key.key_id}|{window.name}"})
        count = int(counted["count"]) if counted else 1
        if over_rate(count, key.rate_limit):
            raise RateLimited(key.key_id, key.rate_limit, retry_after(window))

    async def service_accounts(self) -> frozenset[str]:
        """The ids of every service account that has a key (revoked ones too: their memory
        stays theirs)."""
        ids = await self._keys.distinct("principal_id", {"kind": "service_account"})
        return frozenset(str(i) for i in ids)

    async def count_ignored(self, key_id: str, count: int = 1) -> None:
        """Count end-user ids a service-account key supplied and the server ignored."""
        await self._keys.update_one({"_id": key_id}, {"$inc": {"ignored_user_ids": count}})
