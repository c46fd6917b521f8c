"""A sealed value: what an event field holds instead of plaintext once its content is encrypted.

Crypto-shredding (docs/forgetting-encryption.md): content in the log is encrypted with a data key
of its session, memory or user, and forgetting destroys the key. The log itself is append-only
and replicated; rewriting it to erase a record is neither cheap nor certain (copies, backups,
changelogs), so the content is made unreadable instead of removed.

`Sealed` is the wire form, as text inside an event's JSON::

    {"algorithm": "AES-256-GCM", "version": 1, "key_id": "…", "nonce": "…", "ciphertext": "…"}

- `key_id` names the data key in the key store (`handlers.ports.DataKeys`); the key itself never
  travels with the event.
- `nonce` is base64 of the 12-byte GCM nonce, `ciphertext` base64 of the ciphertext followed by
  the 16-byte authentication tag (the layout `cryptography`'s `AESGCM` produces).
- `version` names this layout and the associated-data framing `handlers.sealing` binds into the
  tag; a new layout gets a new version (and an upcaster is not needed: old versions stay
  readable as long as their key lives).

This module only describes and measures the value; sealing and opening live in
`handlers.sealing` (events import no cryptography).

**Sizes.** Base64 turns 3 bytes into 4 characters and the envelope adds a fixed frame, so a
value of *n* plaintext bytes takes `sealed_json_bytes(n)` bytes of JSON: for a 36-character key
id, 130 + 4·⌈(n + 16)/3⌉. A 200-byte turn (a typical chat message) goes from 202 bytes as a
JSON string to 418; the longest turn (32,000 characters, at most 128,000 UTF-8 bytes) to at
most 170,818 bytes, far below the record limit (`events.codec.MAX_EVENT_BYTES`, 1,000,000). A
snapshot's byte budget (`window.max_snapshot_bytes`) must be measured on the sealed turns.
"""

from __future__ import annotations

import base64
import binascii
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

ALGORITHM: Literal["AES-256-GCM"] = "AES-256-GCM"
SEALED_VERSION: Literal[1] = 1
KEY_BYTES = 32
"""AES-256: a data key is 32 random bytes."""
NONCE_BYTES = 12
"""The GCM nonce length recommended by NIST SP 800-38D (96 bits)."""
TAG_BYTES = 16
"""The GCM authentication tag appended to the ciphertext (128 bits)."""
KEY_ID_CHARS = 36
"""The length of the key ids `handlers.sealing.data_key_id` makes (a UUID's text)."""


def to_base64(data: bytes) -> str:
    """Standard base64 with padding (RFC 4648, section 4)."""
    return base64.b64encode(data).decode("ascii")


def from_base64(text: str) -> bytes:
    """Strict base64: any character outside the alphabet or bad padding is a `ValueError`."""
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except ValueError as exc:  # binascii.Error, or non-ASCII text
        raise ValueError(f"not base64: {exc}") from exc


def base64_chars(size: int) -> int:
    """How many characters base64 with padding writes for `size` bytes."""
    if size < 0:
        raise ValueError(f"not a size: {size}")
    return 4 * ((size + 2) // 3)


BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
"""Standard base64 with padding, whole quads only: checked by pydantic-core's regex engine (linear
time, in Rust), so validating a large sealed value costs no Python-level decoding."""
NONCE_PATTERN = r"^[A-Za-z0-9+/]{16}$"
"""12 bytes are exactly 16 base64 characters, no padding."""


class Sealed(BaseModel):
    """An encrypted value: which key, the nonce and the ciphertext with its tag, as base64."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    algorithm: Literal["AES-256-GCM"] = ALGORITHM
    version: Literal[1] = SEALED_VERSION
    key_id: str = Field(min_length=1, max_length=200)
    nonce: str = Field(pattern=NONCE_PATTERN)
    ciphertext: str = Field(min_length=base64_chars(TAG_BYTES), pattern=BASE64_PATTERN)

    @classmethod
    def of(cls, key_id: str, nonce: bytes, ciphertext: bytes) -> Sealed:
        """The envelope of a nonce and a ciphertext (with its tag)."""
        return cls(key_id=key_id, nonce=to_base64(nonce), ciphertext=to_base64(ciphertext))

    @property
    def nonce_bytes(self) -> bytes:
        return from_base64(self.nonce)

    @property
    def ciphertext_bytes(self) -> bytes:
        """The ciphertext followed by the tag."""
        return from_base64(self.ciphertext)

    @property
    def plaintext_bytes(self) -> int:
        """How many bytes the value holds once opened (from the text's length: no decoding)."""
        padding = len(self.ciphertext) - len(self.ciphertext.rstrip("="))
        return len(self.ciphertext) // 4 * 3 - padding - TAG_BYTES


_FRAME_BYTES = len(
    orjson.dumps(Sealed.model_construct(key_id="", nonce="", ciphertext="").model_dump())
)
"""The envelope's JSON with empty texts: field names, quotes, separators, algorithm, version."""


def sealed_json_bytes(plaintext_bytes: int, *, key_id_chars: int = KEY_ID_CHARS) -> int:
    """The exact size of a `Sealed` holding `plaintext_bytes` bytes, as compact JSON (the codec's
    orjson), for a key id of `key_id_chars` ASCII characters."""
    if plaintext_bytes < 0:
        raise ValueError(f"not a size: {plaintext_bytes}")
    return (
        _FRAME_BYTES
        + key_id_chars
        + base64_chars(NONCE_BYTES)
        + base64_chars(plaintext_bytes + TAG_BYTES)
    )


def sealed_text_json_bytes(text: str, *, key_id_chars: int = KEY_ID_CHARS) -> int:
    """The size of `text` sealed (as its UTF-8 bytes), as compact JSON."""
    return sealed_json_bytes(len(text.encode()), key_id_chars=key_id_chars)


def plaintext_bytes_within(json_bytes: int, *, key_id_chars: int = KEY_ID_CHARS) -> int:
    """The most plaintext bytes whose sealed JSON fits in `json_bytes`: the inverse of
    `sealed_json_bytes`, for a budget given on the wire. 0 also when not even an empty value
    fits (below `sealed_json_bytes(0)`, 154 bytes for a 36-character key id)."""
    room = json_bytes - _FRAME_BYTES - key_id_chars - base64_chars(NONCE_BYTES)
    if room < base64_chars(TAG_BYTES):
        return 0
    return max(0, room // 4 * 3 - TAG_BYTES)
