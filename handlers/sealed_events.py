"""Which fields of which events are sealed, with which key, and what a destroyed key forgets
(docs/architecture.md, "Crypto-shredding").

Events stay plaintext in memory: every stage decides on the models it always had. Content is
sealed where an event becomes a record (`seal_payload`, on its JSON, before the bytes are
written) and opened where a record becomes an event again (`open_payload`, before validation).
So the rule of what is sealed lives here once, for every writer and reader.

* `TurnRecorded`: `content`, `name`; the session's key; bound to the turn's `event_id`.
* `SnapshotPromoted`: each turn's `content`, `name`; the session's key; the turn's `turn_id`.
* `SnapshotExtracted`: `failure` (it may quote the LLM's answer); the session's key; the
  result's `event_id`.
* Memory decisions (`MemoryAdded`, `MemoryUpdated`, `MemoryReinforced`, alone or inside a
  `SnapshotExtracted`, `MemorySaved`, `MemoryRolledBack` or `MemoriesConsolidated`): `content`
  (as JSON), `embedding` (float64s), `reason`, `merged_attributes` (JSON); the memory's key;
  the decision's `event_id`.
* `MemorySaveRequested`: `content` (JSON); the user's key; the save's `event_id`.
* `MemoryConsolidationRequested` and `MemoriesConsolidated`'s own fields hold no content either
  (ids, counts, who asked and why); the merged text and the LLM's reason are the surviving
  decisions', sealed as above.
* `MemoryRollbackRequested` and `MemoryRolledBack`'s own fields hold no content: who asked and
  why (`requested_by`, `reason`) stay plaintext, like a forget request's; the restored content
  is the decision's, sealed as above.
* A stored session window (`handlers.session_window`): its pending turns as a snapshot's, and
  its mean embedding `topic` (float64s, topic shift on); the session's key; the item `topic`.

A turn sealed into a snapshot seals to the same bytes it had on the turns topic: the nonce is
synthetic (`handlers.sealing.synthetic_nonce`) and the item id is the turn's.

**What a destroyed key forgets.** A turn, a snapshot, a save request or a lone memory event
whose key is gone is forgotten whole (`KeyDestroyed` reaches the reader, which skips the
record). A result keeps its other decisions and drops those of forgotten memories; a failure
whose session key is gone reads `FORGOTTEN_FAILURE`.

**Mixed logs.** A field that holds plaintext stays as it is: records written before sealing, or
by a producer that does not seal (another language, `MEMSTREAM_SEAL_CONTENT=false`), are read as
they always were, and part 1's erasure is what forgets them.

Keys come from a `KeyRing` passed in. A ring may answer from memory only and raise
`KeyNotCached` with the lookup to run: the async stages run it in a thread and try again, so
the event loop never waits on the key store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import orjson
from pydantic import ValidationError

from events.sealed import ALGORITHM, Sealed
from handlers.sealing import (
    DataKey,
    KeyDestroyed,
    KeyScope,
    SealBroken,
    associated_data,
    open_sealed,
    pack_vector,
    seal_deterministic,
    unpack_vector,
)

FieldKind = Literal["text", "json", "vector"]
FORGOTTEN_FAILURE = "the failure's details were forgotten (their session's key was destroyed)"

_TURN_FIELDS: tuple[tuple[str, FieldKind], ...] = (("content", "text"), ("name", "text"))
_DECISION_FIELDS: tuple[tuple[str, FieldKind], ...] = (
    ("content", "json"),
    ("embedding", "vector"),
    ("reason", "text"),
    ("merged_attributes", "json"),
)
_SAVE_FIELDS: tuple[tuple[str, FieldKind], ...] = (("content", "json"),)
_TOPIC_FIELDS: tuple[tuple[str, FieldKind], ...] = (("topic", "vector"),)
_FAILURE_FIELDS: tuple[tuple[str, FieldKind], ...] = (("failure", "text"),)
MEMORY_EVENT_TYPES = frozenset({"MemoryAdded", "MemoryUpdated", "MemoryReinforced"})
RESULT_EVENT_TYPES = frozenset(
    {"SnapshotExtracted", "MemorySaved", "MemoryRolledBack", "MemoriesConsolidated"}
)


class KeyNotCached(LookupError):
    """The ring holds no answer for a key in memory; `fetch()` looks it up (blocking I/O: run it
    in a thread), after which the same call succeeds."""

    def __init__(self, what: str, fetch: Callable[[], object]) -> None:
        super().__init__(f"{what} is not in memory")
        self.fetch = fetch


class NoKeyStore(RuntimeError):
    """A reader without a key store met sealed content. Not the record's fault: an outage to
    the stages (`handlers.failures`), which wait until they are given the key store."""


class KeyRing(Protocol):
    def sealing_key(self, scope: KeyScope, owner: str, subject: str | None) -> DataKey:
        """The live key new content of (scope, owner, subject) is sealed with."""
        ...

    def opening_key(self, key_id: str) -> DataKey | None:
        """The key `key_id` names; None once destroyed."""
        ...


@dataclass(frozen=True)
class _Place:
    """Fields of one JSON object sealed with one key, bound to one item."""

    holder: dict[str, Any]
    fields: tuple[tuple[str, FieldKind], ...]
    scope: KeyScope
    owner: str
    subject: str | None
    item_id: str


def seal_payload(payload: dict[str, Any], keys: KeyRing) -> dict[str, Any]:
    """`payload` (an event's JSON) with its content fields sealed, in place; returned."""
    _seal_places(_places(payload), keys)
    return payload


def _seal_places(places: Iterator[_Place], keys: KeyRing) -> None:
    for place in places:
        for name, kind in place.fields:
            value = place.holder.get(name)
            if value in (None, "", [], {}) or is_sealed(value):
                continue
            key = keys.sealing_key(place.scope, place.owner, place.subject)
            associated = associated_data(place.item_id, name)
            sealed = seal_deterministic(_plain_bytes(value, kind), key, associated=associated)
            place.holder[name] = sealed.model_dump()


def open_payload(payload: dict[str, Any], keys: KeyRing) -> dict[str, Any]:
    """`payload` with its sealed fields opened, in place; returned. `KeyDestroyed` when the
    record's content is forgotten; `SealBroken` when a sealed value does not open."""
    kind = payload.get("event_type")
    if kind in RESULT_EVENT_TYPES and isinstance(payload.get("decisions"), list):
        kept = []
        for decision in payload["decisions"]:
            try:
                _open_places(_decision_places(decision), keys)
            except KeyDestroyed:
                continue  # a forgotten memory: its decision goes with it
            kept.append(decision)
        payload["decisions"] = kept
        try:
            _open_places(_failure_places(payload), keys)
        except KeyDestroyed:
            payload["failure"] = FORGOTTEN_FAILURE
        return payload
    _open_places(_places(payload), keys)
    return payload


def opener(keys: KeyRing | None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """What opens a record's content for a reader holding `keys`; without keys, a record with
    sealed content raises `NoKeyStore` (plaintext records read as before)."""
    if keys is not None:
        return lambda payload: open_payload(payload, keys)
    return _refuse_sealed


def sealer(keys: KeyRing) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """What seals an event's content for a writer holding `keys`."""
    return lambda payload: seal_payload(payload, keys)


def _refuse_sealed(payload: dict[str, Any]) -> dict[str, Any]:
    if has_sealed_content(payload):
        raise NoKeyStore(
            f"{payload.get('event_type')} {payload.get('event_id')} has sealed content and this "
            "reader has no key store (set MONGODB_URI for the stages)"
        )
    return payload


def seal_window(payload: dict[str, Any], keys: KeyRing) -> dict[str, Any]:
    """A stored session window (`handlers.window.SessionWindow`, as JSON) with its pending
    turns sealed as a snapshot seals them (same key, same bytes): the window's changelog topic
    holds no plaintext either."""
    _seal_places(_window_places(payload), keys)
    return payload


def open_window(payload: dict[str, Any], keys: KeyRing) -> dict[str, Any]:
    """A stored window with its pending turns opened (`KeyDestroyed`: its session is
    forgotten)."""
    _open_places(_window_places(payload), keys)
    return payload


def without_sealed_turns(payload: dict[str, Any]) -> dict[str, Any]:
    """A stored window with its sealed turns' content emptied, for decisions that need no
    content (is the session idle, which windows does a forgotten user leave)."""
    for place in _window_places(payload):
        for name, _ in place.fields:
            if is_sealed(place.holder.get(name)):
                place.holder[name] = _EMPTIED.get(name)
    return payload


def has_sealed_turns(payload: dict[str, Any]) -> bool:
    """Whether a stored window holds sealed turns."""
    return any(
        is_sealed(place.holder.get(name))
        for place in _window_places(payload)
        for name, _ in place.fields
    )


def has_sealed_content(payload: dict[str, Any]) -> bool:
    """Whether any content field of `payload` is sealed."""
    return any(
        is_sealed(place.holder.get(name)) for place in _places(payload) for name, _ in place.fields
    )


def is_sealed(value: object) -> bool:
    """Whether a JSON value is a sealed envelope (`events.sealed.Sealed`)."""
    return isinstance(value, dict) and value.get("algorithm") == ALGORITHM and "ciphertext" in value


def _open_places(places: Iterator[_Place], keys: KeyRing) -> None:
    for place in places:
        for name, kind in place.fields:
            value = place.holder.get(name)
            if not is_sealed(value):
                continue
            try:
                sealed = Sealed.model_validate(value)
            except ValidationError as exc:
                problems = exc.error_count()
                raise SealBroken(f"{name}: not a valid sealed value ({problems} errors)") from None
            key = keys.opening_key(sealed.key_id)
            plaintext = open_sealed(sealed, key, associated=associated_data(place.item_id, name))
            place.holder[name] = _plain_value(plaintext, kind, sealed.key_id)


def _places(payload: dict[str, Any]) -> Iterator[_Place]:
    kind = payload.get("event_type")
    if kind == "TurnRecorded":
        yield from _session_place(payload, payload, _TURN_FIELDS, payload.get("event_id"))
    elif kind == "SnapshotPromoted":
        yield from _window_places(payload)
    elif kind in RESULT_EVENT_TYPES and isinstance(payload.get("decisions"), list):
        for decision in payload["decisions"]:
            yield from _decision_places(decision)
        yield from _failure_places(payload)
    elif kind in MEMORY_EVENT_TYPES:
        yield from _decision_places(payload)
    elif kind == "MemorySaveRequested":
        user, item = payload.get("user_id"), payload.get("event_id")
        if isinstance(user, str) and isinstance(item, str):
            yield _Place(payload, _SAVE_FIELDS, "user", user, None, item)


_EMPTIED: dict[str, Any] = {"content": "", "topic": []}
"""What `without_sealed_turns` leaves in a sealed field (None for the others)."""


def _window_places(payload: dict[str, Any]) -> Iterator[_Place]:
    """The turns of a snapshot or a stored window, each bound to its turn id, and a stored
    window's mean embedding (`topic`)."""
    turns = payload.get("turns")
    for turn in turns if isinstance(turns, list) else ():
        if isinstance(turn, dict):
            yield from _session_place(payload, turn, _TURN_FIELDS, turn.get("turn_id"))
    if payload.get("topic"):
        yield from _session_place(payload, payload, _TOPIC_FIELDS, "topic")


def _session_place(
    event: dict[str, Any],
    holder: dict[str, Any],
    fields: tuple[tuple[str, FieldKind], ...],
    item: object,
) -> Iterator[_Place]:
    user, session = event.get("user_id"), event.get("session_id")
    if isinstance(user, str) and isinstance(session, str) and session and isinstance(item, str):
        yield _Place(holder, fields, "session", user, session, item)


def _decision_places(decision: object) -> Iterator[_Place]:
    if not isinstance(decision, dict):
        return
    user, memory, item = (decision.get(k) for k in ("user_id", "memory_id", "event_id"))
    if isinstance(user, str) and isinstance(memory, str) and memory and isinstance(item, str):
        yield _Place(decision, _DECISION_FIELDS, "memory", user, memory, item)


def _failure_places(payload: dict[str, Any]) -> Iterator[_Place]:
    if payload.get("event_type") == "SnapshotExtracted":
        yield from _session_place(payload, payload, _FAILURE_FIELDS, payload.get("event_id"))


def _plain_bytes(value: Any, kind: FieldKind) -> bytes:
    if kind == "text":
        if not isinstance(value, str):
            raise SealBroken(f"a text field holds {type(value).__name__}")
        return value.encode()
    if kind == "vector":
        return pack_vector([float(x) for x in value])
    return orjson.dumps(value)


def _plain_value(plaintext: bytes, kind: FieldKind, key_id: str) -> Any:
    if kind == "vector":
        return list(unpack_vector(plaintext, key_id))
    try:
        return plaintext.decode() if kind == "text" else orjson.loads(plaintext)
    except (UnicodeDecodeError, ValueError) as exc:  # authentic, so sealed by a buggy writer
        raise SealBroken(f"sealed value under {key_id} is not {kind}") from exc
