"""Point-in-time reads: which version was current then, with the reinforcements up to then."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from handlers.history import state_as_of
from tests.factories import at


def evidence(event_id: str, seconds: float) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "source": "extraction",
        "snapshot_id": f"s-{event_id}",
        "session_id": "s",
        "observed_at": at(seconds),
    }


def version(
    number: int,
    text: str,
    created: float,
    *,
    status: str = "current",
    aliases: list[str] | None = None,
) -> dict[str, Any]:
    event_id = f"e{number}"
    return {
        "_id": f"m1:v{number}",
        "memory_id": "m1",
        "version": number,
        "text": text,
        "status": status,
        "superseded_by": {"version": number + 1} if status == "superseded" else None,
        "reinforcement_count": 0,
        "attributes": {"aliases": aliases or []},
        "evidence": [evidence(event_id, created)],
        "created_by_event": event_id,
        "created_at": at(created),
        "updated_at": at(created),
    }


def created(number: int, seconds: float, aliases: list[str]) -> dict[str, Any]:
    return {
        "_id": f"e{number}",
        "event_type": "MemoryAdded" if number == 1 else "MemoryUpdated",
        "memory_id": "m1",
        "occurred_at": at(seconds),
        "event": {"content": {"attributes": {"aliases": aliases}}},
    }


def reinforced(
    event_id: str, number: int, seconds: float, merged: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "_id": event_id,
        "event_type": "MemoryReinforced",
        "memory_id": "m1",
        "occurred_at": at(seconds),
        "event": {
            "version": number,
            "merged_attributes": merged or {},
            "evidence": {
                "source": "extraction",
                "snapshot_id": f"s-{event_id}",
                "session_id": "s",
                "observed_at": at(seconds).isoformat(),
            },
        },
    }


VERSIONS = [
    version(1, "The user lives in Lisbon.", 0, status="superseded"),
    version(2, "The user lives in Porto.", 100, aliases=["P"]),
]
EVENTS = [
    created(1, 0, []),
    reinforced("r1", 1, 50, {"aliases": ["L"]}),
    created(2, 100, ["P"]),
    reinforced("r2", 2, 150),
    reinforced("r3", 2, 200),
]


def states(when: float) -> list[dict[str, Any]]:
    return state_as_of(VERSIONS, EVENTS, at(when))


def test_before_anything_was_learned_there_is_nothing() -> None:
    assert states(-1) == []


def test_the_first_version_with_its_reinforcements_up_to_then() -> None:
    (early,) = states(10)
    assert (early["text"], early["status"], early["reinforcement_count"]) == (
        "The user lives in Lisbon.",
        "current",
        0,
    )
    (later,) = states(60)
    assert later["reinforcement_count"] == 1
    assert later["attributes"] == {"aliases": ["L"]}
    assert [e["event_id"] for e in later["evidence"]] == ["e1", "r1"]


def test_after_an_update_the_new_version_is_current_and_counts_its_own_reinforcements() -> None:
    (state,) = states(160)
    assert (state["text"], state["version"], state["reinforcement_count"]) == (
        "The user lives in Porto.",
        2,
        1,
    )
    assert state["superseded_by"] is None
    assert state["updated_at"] == at(150)


def test_now_matches_the_read_model() -> None:
    (state,) = state_as_of(VERSIONS, EVENTS, datetime.max.replace(tzinfo=at(0).tzinfo))
    assert state["reinforcement_count"] == 2
