"""Seeded malformed records for the turns topic, each with the reason the pipeline must give.

Every record is distinct (dead letters are identified by a hash of the key and value), and its
expected reason comes from the one validation the window applies (`handlers.inputs`), so the
oracle never restates a rule.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from events.codec import encode
from events.memories import derived_id
from handlers.inputs import InvalidRecord, read_turns_record
from tests import factories as f

Payload = dict[str, Any]


@dataclass(frozen=True)
class Malformed:
    kind: str
    key: bytes | None
    value: bytes

    @property
    def reason(self) -> str:
        """Why the window refuses it (what its dead letter must say)."""
        try:
            read_turns_record(self.key, self.value)
        except InvalidRecord as exc:
            return str(exc)
        raise AssertionError(f"{self.kind} record is valid: {self.value[:200]!r}")

    def dead_letter_id(self, topic: str) -> str:
        """The id of its dead letter (`streams.dead_letters.dead_letter_record`)."""
        import hashlib

        content = hashlib.sha256((self.key or b"") + b"\x00" + self.value).hexdigest()
        return derived_id("dead-letter", "window", topic, content)


def _turn(n: int) -> Payload:
    now = datetime.now(UTC)
    event = f.turn(
        event_id=f"malformed-{n}",
        user_id=f"maluser{n % 7}",
        session_id=f"m{n}",
        content=f"malformed input number {n}",
        occurred_at=now,
        recorded_at=now,
    )
    payload: Payload = orjson.loads(encode(event))
    return payload


def _key(payload: Payload) -> bytes:
    return f"{payload.get('user_id')}|{payload.get('session_id')}".encode()


def _json(payload: Payload) -> bytes:
    return orjson.dumps(payload)


def _mutated(
    change: Callable[[Payload, random.Random], None],
) -> Callable[..., tuple[bytes | None, bytes]]:
    def make(n: int, rng: random.Random) -> tuple[bytes | None, bytes]:
        payload = _turn(n)
        key = _key(payload)
        change(payload, rng)
        return key, _json(payload)

    return make


def _set(field: str, *values: Any) -> Callable[..., tuple[bytes | None, bytes]]:
    return _mutated(lambda p, rng: p.__setitem__(field, rng.choice(values)))


def _drop(field: str) -> Callable[..., tuple[bytes | None, bytes]]:
    return _mutated(lambda p, rng: p.pop(field))


def _raw(make: Callable[[int, random.Random], bytes]) -> Callable[..., tuple[bytes | None, bytes]]:
    return lambda n, rng: (f"maluser{n % 7}|m{n}".encode(), make(n, rng))


def _keyed(key: Callable[[Payload], bytes | None]) -> Callable[..., tuple[bytes | None, bytes]]:
    def make(n: int, rng: random.Random) -> tuple[bytes | None, bytes]:
        payload = _turn(n)
        return key(payload), _json(payload)

    return make


def _oversized(payload: Payload, rng: random.Random) -> None:
    payload["content"] = "x" * rng.randint(32_001, 40_000)


def _wrong_topic(n: int, rng: random.Random) -> tuple[bytes | None, bytes]:
    snapshot = f.snapshot(
        user_id=f"maluser{n % 7}", session_id=f"m{n}", turns=[{"content": str(n)}]
    )
    return f"maluser{n % 7}|m{n}".encode(), encode(snapshot)


KINDS: dict[str, Callable[[int, random.Random], tuple[bytes | None, bytes]]] = {
    "invalid JSON": _raw(lambda n, rng: f'{{"event_type": "TurnRecorded", "n": {n}'.encode()),
    "not an object": _raw(lambda n, rng: orjson.dumps([n, "turn"])),
    "not UTF-8": _raw(lambda n, rng: b"\xff\xfe" + str(n).encode() + b"\xc3\x28"),
    "empty value": _raw(lambda n, rng: b" " * (n % 5 + 1) if n % 2 else b""),
    "unknown event type": _set("event_type", "TurnDeleted", "Turn", "", "turnrecorded"),
    "wrong schema version": _set("schema_version", 0, 2, 99, "1", None),
    "unknown role": _set("role", "robot", "User", "admin", "", 7),
    "oversized content": _mutated(_oversized),
    "empty content": _set("content", ""),
    "missing event id": _drop("event_id"),
    "empty event id": _set("event_id", ""),
    "event id of the wrong type": _set("event_id", 12345, ["a"], {"id": 1}),
    "missing user id": _drop("user_id"),
    "bad user id": _set("user_id", "bad user", "bad|user", ""),
    "missing session id": _drop("session_id"),
    "content of the wrong type": _set("content", 42, ["hello"], {"text": "hi"}, None),
    "bad time": _set("occurred_at", "yesterday", "2026-01-31T12:00:00", ""),
    "missing recorded_at": _drop("recorded_at"),
    "bad speaker name": _set("name", "[John]", "a:b", "user"),
    "tool name on a user turn": _set("tool_name", "search"),
    "key disagrees with the payload": _keyed(lambda p: f"{p['user_id']}|other".encode()),
    "no key": _keyed(lambda p: None),
    "event of another topic": _wrong_topic,
}


def generate(seed: int, count: int) -> list[Malformed]:
    """`count` distinct malformed records, cycling through every kind in a seeded order."""
    rng = random.Random(seed)
    kinds = list(KINDS)
    records: list[Malformed] = []
    for n in range(count):
        kind = kinds[n % len(kinds)] if n < len(kinds) else rng.choice(kinds)
        key, value = KINDS[kind](n, rng)
        records.append(Malformed(kind, key, value))
    return records
