"""Schema upcasters: stored events of an older `schema_version` lifted to the current one.

`upcast(payload)` applies the registered steps until the payload reaches its type's current
version. The codec upcasts every record it reads; events nested in another (the decisions inside
an extraction record) are upcast by the model that holds them. Register a step here whenever an
event's `schema_version` is bumped, and keep a stored sample of the old version under
`tests/events/samples/legacy/`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def _snapshot_extracted_v1_to_v2(payload: dict[str, Any]) -> dict[str, Any]:
    """v1 closed an extraction whose `MemoryAdded` events travelled as records of their own (and
    are still projected as such); v2 carries the decisions itself. A v1 record has none."""
    lifted = {key: value for key, value in payload.items() if key != "memory_ids"}
    return {**lifted, "schema_version": 2, "decisions": []}


def _memory_event_v1_to_v2(payload: dict[str, Any]) -> dict[str, Any]:
    """v2 records where a memory event came from (prompt, models); v1 did not know."""
    return {**payload, "schema_version": 2, "provenance": None}


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("SnapshotExtracted", 1): _snapshot_extracted_v1_to_v2,
    ("MemoryAdded", 1): _memory_event_v1_to_v2,
    ("MemoryUpdated", 1): _memory_event_v1_to_v2,
    ("MemoryReinforced", 1): _memory_event_v1_to_v2,
}
"""`(event_type, from_version) -> function` returning the payload at `from_version + 1`."""


def upcast(payload: dict[str, Any]) -> dict[str, Any]:
    """Apply registered upcasters until the payload reaches its type's current version."""
    while True:
        key = (str(payload.get("event_type")), _as_int(payload.get("schema_version")))
        step = UPCASTERS.get(key)
        if step is None:
            return payload
        payload = step(payload)


def _as_int(value: object) -> int:
    return value if isinstance(value, int) else -1
