"""A user's memories as they were at a point in time, rebuilt from their versions and events.

Pure (docs/architecture.md, "Read models"). The `memories` collection keeps every version and
`memory_events` every event, each with its event time (`occurred_at`); the state at time *t* is
what the events up to *t* made of them:

* a version existed at *t* if the event that created it occurred at or before *t*;
* it was *current* at *t* if no later version of the same memory had been created by *t*, and
  no consolidation had retired the memory by *t* (`retired_into.at`);
* its reinforcement count and evidence at *t* are those of the reinforcements up to *t*;
* attributes merged by a reinforcement after *t* are taken out again.

Times are event times, the same as everywhere in the read model, so a rebuilt read model answers
the same questions the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from events.memories import Evidence

Document = dict[str, Any]


def state_as_of(
    versions: Iterable[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]],
    at: datetime,
) -> list[Document]:
    """The versions current at `at`, as they were then (newest first).

    `versions` are `memories` documents (any status); `events` are the user's `memory_events`
    entries (the event that created each version, and the reinforcements).
    """
    events = list(events)
    created = {e["_id"]: e for e in events if e["event_type"] != "MemoryReinforced"}
    reinforcements = [e for e in events if e["event_type"] == "MemoryReinforced"]
    existing = [v for v in versions if v["created_at"] <= at]
    latest: dict[str, Mapping[str, Any]] = {}
    for version in existing:
        known = latest.get(version["memory_id"])
        if known is None or version["version"] > known["version"]:
            latest[version["memory_id"]] = version
    by_version: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for entry in reinforcements:
        if entry["occurred_at"] <= at:
            key = (entry["memory_id"], entry["event"]["version"])
            by_version.setdefault(key, []).append(entry)
    states = [
        _as_it_was(
            version,
            created.get(version.get("created_by_event", "")),
            by_version.get((version["memory_id"], version["version"]), []),
        )
        for version in latest.values()
        if not _retired_by(version, at)
    ]
    return sorted(states, key=lambda s: (s["created_at"], s["_id"]), reverse=True)


def _retired_by(version: Mapping[str, Any], at: datetime) -> bool:
    """Whether a consolidation retired the memory at this version by `at`."""
    retired = version.get("retired_into")
    return isinstance(retired, Mapping) and bool(retired["at"] <= at)


def _as_it_was(
    version: Mapping[str, Any],
    creation: Mapping[str, Any] | None,
    reinforced: list[Mapping[str, Any]],
) -> Document:
    ordered = sorted(reinforced, key=lambda e: (e["occurred_at"], e["_id"]))
    original = creation["event"]["content"].get("attributes") if creation else None
    attributes = dict(original if original is not None else version.get("attributes") or {})
    for entry in ordered:
        attributes.update(entry["event"].get("merged_attributes") or {})
    first = [
        e
        for e in version.get("evidence", [])
        if e.get("event_id") == version.get("created_by_event")
    ]
    evidence = first + [
        {"event_id": e["_id"], **Evidence.model_validate(e["event"]["evidence"]).model_dump()}
        for e in ordered
    ]
    updated_at = max([version["created_at"], *(e["occurred_at"] for e in ordered)])
    return {
        **version,
        "status": "current",
        "superseded_by": None,
        "retired_into": None,
        "reinforcement_count": len(ordered),
        "evidence": evidence,
        "attributes": attributes,
        "updated_at": updated_at,
    }
