"""Sealing and opening event content with a data key (AES-256-GCM): the rules, no I/O.

See docs/forgetting-encryption.md for which fields are sealed with which key. What this module
decides:

1. **One algorithm, authenticated.** AES-256-GCM (`cryptography`'s `AESGCM`, OpenSSL): it
   encrypts and authenticates in one pass, so a changed byte anywhere — ciphertext, tag, nonce,
   key id, associated data — makes `open_sealed` refuse (`SealBroken`) rather than return
   garbage.
2. **Nonces come from the caller** (`os.urandom(NONCE_BYTES)` in production), so every function
   here is deterministic and testable. GCM's one hard rule is never to reuse a nonce with the
   same key: 96 random bits per value keep the chance of a repeat below 2⁻³² for up to 2³²
   values under one key (NIST SP 800-38D, 8.3), and a key here seals one session's, one
   memory's or one user's direct saves — orders of magnitude fewer.
3. **Associated data binds a value to its place.** The tag covers, besides the ciphertext, the
   envelope's version, algorithm and key id, and the caller's `associated` bytes —
   `associated_data(item_id, field)`: the id of the thing the value belongs to (a turn id, a
   memory event id, a save id) and the field's name. A ciphertext copied into another event or
   another field does not open: a forged record cannot borrow a sealed value from a real one.
   The item id is the *turn's* id, not the enclosing event's, where a value travels on: the
   window copies a turn's sealed content into a snapshot unchanged, without a key, and it still
   opens there (its `SnapshotTurn.turn_id` is the turn's id).
4. **Framing is unambiguous.** Every part of the associated data is length-prefixed, so no two
   different (item id, field) pairs — whatever characters ids contain — frame to the same bytes.
5. **A destroyed key is not an error of the data.** `open_sealed(sealed, None, …)` — the key
   store answered "destroyed" — raises `KeyDestroyed`, which a reader treats as *forgotten*
   (skip the value or the event), distinct from `SealBroken` (tampering, a bug, the wrong key:
   poison, dead-lettered).

Typed helpers seal text (UTF-8), JSON values (orjson) and vectors (float64, little-endian: an
embedding opens to exactly the floats that were sealed).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from events.sealed import (
    ALGORITHM,
    KEY_BYTES,
    NONCE_BYTES,
    SEALED_VERSION,
    Sealed,
)

KeyScope = Literal["session", "memory", "user"]
"""Whose content a data key seals: one session's, one memory's, or one user's (direct saves)."""
KEY_SCOPES: tuple[KeyScope, ...] = ("session", "memory", "user")

_KEY_NAMESPACE = uuid.UUID("4d6e2f0a-9b1c-4e7d-8a35-2c9f6b0e7d14")
_ASSOCIATED_CONTEXT = b"memstream.sealed"


class SealingError(ValueError):
    """A sealed value could not be sealed or opened; the message says why."""


class SealBroken(SealingError):
    """The value does not open with this key and associated data: tampered with, moved to
    another event or field, or sealed with another key. Poison, never "forgotten"."""


class KeyDestroyed(SealingError):
    """The value's key was destroyed: its content is forgotten, for good."""

    def __init__(self, key_id: str) -> None:
        super().__init__(f"data key {key_id} was destroyed: the value is forgotten")
        self.key_id = key_id


class UnknownKey(LookupError):
    """No key was ever stored under this id. Not "forgotten": the key store is not the one the
    content was sealed with (a wrong database, a backup older than the content). An outage to
    the stages (`handlers.failures`): they wait rather than drop or dead-letter the record."""


@dataclass(frozen=True)
class DataKey:
    """A live data key: its id and its 32 bytes of material (never printed)."""

    key_id: str
    material: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.material) != KEY_BYTES:
            raise ValueError(f"a data key is {KEY_BYTES} bytes, not {len(self.material)}")

    @cached_property
    def aead(self) -> AESGCM:
        """The AES-GCM primitive over this key (built once per key object)."""
        return AESGCM(self.material)


def data_key_id(scope: KeyScope, owner: str, subject: str | None, generation: int) -> str:
    """The id of generation `generation` of the key of `scope` for `owner` (a user id) and
    `subject` (a session or memory id; None for the user scope).

    Deterministic, so two processes creating the same key at once name the same document and
    the key store keeps one (`handlers.ports.DataKeys`). A UUID: opaque, and a fixed 36 characters
    in every sealed value (`events.sealed.KEY_ID_CHARS`) whatever the ids' lengths.
    """
    check_subject(scope, subject)
    if generation < 1:
        raise ValueError(f"generations count from 1, not {generation}")
    parts = orjson.dumps([scope, owner, subject, generation]).decode()
    return str(uuid.uuid5(_KEY_NAMESPACE, parts))


def check_subject(scope: KeyScope, subject: str | None) -> None:
    """A session or memory key names its subject; a user key has none."""
    if scope == "user" and subject is not None:
        raise ValueError("a user key has no subject")
    if scope != "user" and not subject:
        raise ValueError(f"a {scope} key names its {scope}")


def associated_data(item_id: str, field_name: str) -> bytes:
    """What binds a sealed value to its place: the id of the item it belongs to (a turn id, a
    memory event id, a save id) and the field's name."""
    return _framed(_ASSOCIATED_CONTEXT, item_id.encode(), field_name.encode())


def _framed(*parts: bytes) -> bytes:
    return b"".join([len(part).to_bytes(4, "big") + part for part in parts])


_ENVELOPE = _framed(str(SEALED_VERSION).encode(), ALGORITHM.encode())


def _bound(key_id: str, associated: bytes) -> bytes:
    """The associated data the tag covers: the envelope's version, algorithm and key id, then
    the caller's `associated`."""
    return _ENVELOPE + _framed(key_id.encode(), associated)


def seal(plaintext: bytes, key: DataKey, *, associated: bytes, nonce: bytes) -> Sealed:
    """`plaintext` encrypted and authenticated with `key`, bound to `associated`.

    `nonce`: 12 fresh random bytes (`os.urandom(NONCE_BYTES)`), never reused with this key."""
    if len(nonce) != NONCE_BYTES:
        raise SealingError(f"a nonce is {NONCE_BYTES} bytes, not {len(nonce)}")
    ciphertext = key.aead.encrypt(nonce, plaintext, _bound(key.key_id, associated))
    return Sealed.of(key.key_id, nonce, ciphertext)


def open_sealed(sealed: Sealed, key: DataKey | None, *, associated: bytes) -> bytes:
    """The plaintext of `sealed`.

    `key` is what the key store holds for `sealed.key_id`: None when it was destroyed
    (`KeyDestroyed`). `SealBroken` when the value does not open: another key, other associated
    data, or any byte changed."""
    if key is None:
        raise KeyDestroyed(sealed.key_id)
    if key.key_id != sealed.key_id:
        raise SealBroken(f"sealed with data key {sealed.key_id}, not {key.key_id}")
    try:
        return key.aead.decrypt(
            sealed.nonce_bytes, sealed.ciphertext_bytes, _bound(sealed.key_id, associated)
        )
    except InvalidTag as exc:
        raise SealBroken(
            f"sealed value under data key {sealed.key_id} does not open: changed, moved to "
            "another event or field, or sealed with other key material"
        ) from exc


def seal_text(text: str, key: DataKey, *, associated: bytes, nonce: bytes) -> Sealed:
    """`text` (as UTF-8) sealed."""
    return seal(text.encode(), key, associated=associated, nonce=nonce)


def open_text(sealed: Sealed, key: DataKey | None, *, associated: bytes) -> str:
    try:
        return open_sealed(sealed, key, associated=associated).decode()
    except UnicodeDecodeError as exc:  # authentic, so sealed by a writer with a bug
        raise SealBroken(f"sealed value under {sealed.key_id} is not UTF-8 text") from exc


def seal_json(value: Any, key: DataKey, *, associated: bytes, nonce: bytes) -> Sealed:
    """A JSON value (a dict of attributes, a memory's content) sealed as its orjson bytes."""
    return seal(orjson.dumps(value), key, associated=associated, nonce=nonce)


def open_json(sealed: Sealed, key: DataKey | None, *, associated: bytes) -> Any:
    try:
        return orjson.loads(open_sealed(sealed, key, associated=associated))
    except orjson.JSONDecodeError as exc:
        raise SealBroken(f"sealed value under {sealed.key_id} is not JSON") from exc


_FLOAT64 = struct.Struct("<d")


def seal_vector(
    vector: Sequence[float], key: DataKey, *, associated: bytes, nonce: bytes
) -> Sealed:
    """An embedding sealed as little-endian float64s: it opens to exactly the same floats, and
    takes about as many bytes as the JSON numbers it replaces (8·4/3 characters a component
    against ~10-12 for seven significant digits)."""
    packed = struct.pack(f"<{len(vector)}d", *vector)
    return seal(packed, key, associated=associated, nonce=nonce)


def open_vector(sealed: Sealed, key: DataKey | None, *, associated: bytes) -> tuple[float, ...]:
    packed = open_sealed(sealed, key, associated=associated)
    if len(packed) % _FLOAT64.size:
        raise SealBroken(f"sealed value under {sealed.key_id} is not a float64 vector")
    return struct.unpack(f"<{len(packed) // _FLOAT64.size}d", packed)


def synthetic_nonce(key: DataKey, *, associated: bytes, plaintext: bytes) -> bytes:
    """A nonce derived from the key, the associated data and the plaintext (SIV-style).

    The same value sealed twice in the same place seals to the same bytes, so a writer that
    seals again — a producer retrying, an application recording a turn again, the window
    sealing a turn into a snapshot, a replayed stage — writes what it wrote before, and
    duplicate checks keep working on the wire. It reveals only that one item's value repeated,
    which its id says already. Two different plaintexts under one key get the same nonce only
    if HMAC-SHA256 truncated to 96 bits collides: ~2⁻⁴⁸ after 2²⁴ values under one key, far
    more than a session, memory or user key seals."""
    mac = hmac.new(key.material, _framed(b"nonce", associated, plaintext), hashlib.sha256)
    return mac.digest()[:NONCE_BYTES]


def seal_deterministic(plaintext: bytes, key: DataKey, *, associated: bytes) -> Sealed:
    """`seal` with the `synthetic_nonce` of the value (docs/architecture.md, "Crypto-shredding")."""
    nonce = synthetic_nonce(key, associated=associated, plaintext=plaintext)
    return seal(plaintext, key, associated=associated, nonce=nonce)


def pack_vector(vector: Sequence[float]) -> bytes:
    """An embedding as little-endian float64s (what `seal_vector` seals)."""
    return struct.pack(f"<{len(vector)}d", *vector)


def unpack_vector(packed: bytes, key_id: str) -> tuple[float, ...]:
    if len(packed) % _FLOAT64.size:
        raise SealBroken(f"sealed value under {key_id} is not a float64 vector")
    return struct.unpack(f"<{len(packed) // _FLOAT64.size}d", packed)
