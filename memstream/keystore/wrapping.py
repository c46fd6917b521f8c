"""Envelope encryption of the data keys: each stored wrapped by a key-encryption key (KEK) that
the database never holds (docs/forgetting-encryption.md, "Wrapped data keys").

A data key document keeps `wrapped` (the key's material sealed with AES-256-GCM under a KEK, the
key's id as associated data, so a wrapped key moved to another document does not open) and
`kek` (which KEK wrapped it). A dump of `data_keys` without the KEK opens nothing; destroying a
data key still deletes its wrapped material. Documents written before wrapping keep plain
`material` and stay readable; `memstream master-key rewrap` wraps them.

**The port.** `KeyWrapper`: `wrap` (with the KEK new keys use) and `unwrap` (with the KEK a
document names). `LocalMasterKeys` is the provider tested here: master keys in a file, the first
line the one that wraps, later lines older ones still unwrapping until `rewrap` has moved every
document off them (rotation never re-seals the log: the data keys stay the same). A cloud KMS or
Vault provider implements the same two methods around its encrypt / decrypt calls (AWS KMS
`Encrypt`/`Decrypt` with the key id as encryption context, Vault transit `encrypt`/`decrypt`);
none is shipped or claimed: none can be tested on these machines.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MASTER_KEY_BYTES = 32
NONCE_BYTES = 12
LOCAL_PREFIX = "local:"


class KekUnavailable(RuntimeError):
    """A data key is wrapped by a KEK this process does not hold (or the wrapping is broken):
    its content cannot be opened here. The message names the KEK and the setting."""


class KeyWrapper(Protocol):
    """Wraps and unwraps data key material with key-encryption keys (module doc)."""

    @property
    def current(self) -> str:
        """The id of the KEK `wrap` uses."""
        ...

    def wrap(self, material: bytes, key_id: str) -> tuple[str, bytes]:
        """(the KEK's id, `material` wrapped under it, bound to `key_id`)."""
        ...

    def unwrap(self, kek: str, wrapped: bytes, key_id: str) -> bytes:
        """The material `wrapped` holds; `KekUnavailable` when `kek` is not held here or the
        wrapping does not open for `key_id`."""
        ...


def kek_id(master_key: bytes) -> str:
    """A master key's public name: a fingerprint that says which key, not what it is."""
    return LOCAL_PREFIX + hashlib.sha256(b"memstream master key\x00" + master_key).hexdigest()[:16]


@dataclass(frozen=True)
class LocalMasterKeys:
    """Master keys held in this process: the first wraps, every one unwraps."""

    keys: tuple[bytes, ...]
    source: str = "MEMSTREAM_MASTER_KEY_FILE"
    random_nonce: Callable[[int], bytes] = os.urandom
    """Where nonces come from (`os.urandom`; tests may pass a deterministic one)."""

    def __post_init__(self) -> None:
        if not self.keys:
            raise ValueError("no master key")
        for key in self.keys:
            if len(key) != MASTER_KEY_BYTES:
                raise ValueError(f"a master key is {MASTER_KEY_BYTES} bytes, not {len(key)}")

    @property
    def current(self) -> str:
        return kek_id(self.keys[0])

    @property
    def held(self) -> tuple[str, ...]:
        return tuple(kek_id(key) for key in self.keys)

    def wrap(self, material: bytes, key_id: str) -> tuple[str, bytes]:
        nonce = self.random_nonce(NONCE_BYTES)
        sealed = AESGCM(self.keys[0]).encrypt(nonce, material, key_id.encode())
        return self.current, nonce + sealed

    def unwrap(self, kek: str, wrapped: bytes, key_id: str) -> bytes:
        by_id = dict(zip(self.held, self.keys, strict=True))
        master = by_id.get(kek)
        if master is None:
            raise KekUnavailable(
                f"data key {key_id} is wrapped by master key {kek}, which {self.source} does not "
                f"hold (it holds {', '.join(self.held)})"
            )
        try:
            nonce, sealed = wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:]
            return AESGCM(master).decrypt(nonce, sealed, key_id.encode())
        except InvalidTag as exc:
            raise KekUnavailable(
                f"data key {key_id} does not open with master key {kek}: its wrapping was "
                "changed or belongs to another key"
            ) from exc


def new_master_key() -> bytes:
    return os.urandom(MASTER_KEY_BYTES)


def encode_master_keys(keys: Sequence[bytes]) -> str:
    """The file format: one base64 master key per line, the wrapping one first."""
    return "".join(base64.b64encode(key).decode() + "\n" for key in keys)


def read_master_keys(path: Path) -> LocalMasterKeys:
    """The master keys of a file (`encode_master_keys`); blank lines and `#` comments skipped.
    A missing, unreadable or malformed file is a `ValueError` naming it."""
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"master key file {path}: {exc}") from exc
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            keys.append(base64.b64decode(line, validate=True))
        except binascii.Error as exc:
            raise ValueError(f"master key file {path}, line {number}: not base64") from exc
    try:
        return LocalMasterKeys(tuple(keys), source=f"master key file {path}")
    except ValueError as exc:
        raise ValueError(f"master key file {path}: {exc}") from exc


def write_master_keys(path: Path, keys: Sequence[bytes]) -> None:
    """Write `keys` to `path`, readable by its owner only (written aside, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(path.name + ".new")
    descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as file:
        file.write(encode_master_keys(keys))
    os.replace(scratch, path)
