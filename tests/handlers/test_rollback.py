"""Rollback decisions: the restoring version, each refusal, and the same answer every time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from events.memories import MemoryUpdated
from handlers.known_memory import KnownMemory, evolve
from handlers.rollback import (
    StoredVersion,
    rollback_decision,
    rollback_record,
    rollback_result_id,
)
from tests import factories as f

FIRST = f.memory_added(memory_id="m-1", expires_at=f.CLOCK + timedelta(days=30))
SECOND = f.memory_updated(memory_id="m-1")
STAMP = f.provenance(prompt_version=None, embedding_model="stage-embedder")


def _current(*events: Any) -> KnownMemory:
    known: dict[str, KnownMemory] = {}
    for event in events or (FIRST, SECOND):
        known = evolve(known, [event])
    return known["m-1"]


def _stored(event: Any, **overrides: Any) -> StoredVersion:
    fields: dict[str, Any] = {
        "memory_id": event.memory_id,
        "version": event.version,
        "user_id": event.user_id,
        "memory_type": event.memory_type,
        "content": event.content,
        "embedding": event.embedding,
        "embedding_model": "old-embedder",
        "expires_at": event.expires_at,
    }
    fields.update(overrides)
    return StoredVersion(**fields)


VERSIONS = [_stored(FIRST), _stored(SECOND)]


def test_the_restoring_version_carries_the_target_and_follows_the_current() -> None:
    request = f.rollback_request(to_version=1)
    decided = rollback_decision(request, _current(), VERSIONS, STAMP)
    assert isinstance(decided, MemoryUpdated)
    assert (decided.version, decided.supersedes_version) == (3, 2)
    assert decided.content == FIRST.content
    assert decided.embedding == FIRST.embedding
    assert decided.expires_at == FIRST.expires_at
    assert decided.occurred_at == request.occurred_at
    assert decided.evidence.source == "sdk"
    assert decided.provenance is not None
    assert decided.provenance.embedding_model == "old-embedder"  # the vector's own space
    assert decided.reason == "rollback to version 1 requested by cli:alice: the update was wrong"


def test_the_decision_is_deterministic() -> None:
    request = f.rollback_request()
    one = rollback_record(request, rollback_decision(request, _current(), VERSIONS, STAMP))
    two = rollback_record(request, rollback_decision(request, _current(), VERSIONS, STAMP))
    assert one == two
    assert one.event_id == rollback_result_id(request.event_id, "semantic")
    assert one.decisions and one.refused is None
    assert one.memory_ids == ("m-1",)


def test_a_reason_without_why_names_who() -> None:
    request = f.rollback_request(reason="")
    decided = rollback_decision(request, _current(), VERSIONS, STAMP)
    assert isinstance(decided, MemoryUpdated)
    assert decided.reason == "rollback to version 1 requested by cli:alice"


@pytest.mark.parametrize(
    ("request_fields", "current", "versions", "refusal"),
    [
        ({"memory_id": "m-1"}, None, [], "unknown memory m-1"),
        ({"to_version": 7}, "current", VERSIONS, "has no version 7"),
        ({"to_version": 2}, "current", VERSIONS, "is at version 2 already"),
        ({}, "current", [_stored(SECOND)], "has no version 1"),
        ({}, "current", [_stored(FIRST, user_id="u2")], "not a semantic memory of this user"),
        (
            {},
            "current",
            [_stored(FIRST, memory_type="episodic")],
            "not a semantic memory of this user",
        ),
        (
            {"occurred_at": f.CLOCK + timedelta(days=31)},
            "current",
            [_stored(FIRST), _stored(SECOND)],
            "version 1 of memory m-1 expired",
        ),
    ],
)
def test_refusals(
    request_fields: dict[str, Any],
    current: str | None,
    versions: list[StoredVersion],
    refusal: str,
) -> None:
    request = f.rollback_request(**request_fields)
    known = _current() if current else None
    decided = rollback_decision(request, known, versions, STAMP)
    assert isinstance(decided, str)
    assert refusal in decided
    record = rollback_record(request, decided)
    assert record.decisions == ()
    assert record.refused == decided


def test_an_expired_current_version_is_not_rolled_back() -> None:
    expiring = f.memory_updated(memory_id="m-1", expires_at=f.CLOCK)
    request = f.rollback_request(occurred_at=f.CLOCK + timedelta(seconds=1))
    decided = rollback_decision(request, _current(FIRST, expiring), VERSIONS, STAMP)
    assert isinstance(decided, str)
    assert "expired" in decided


def test_a_refused_record_restores_nothing() -> None:
    request = f.rollback_request()
    restored = rollback_record(request, rollback_decision(request, _current(), VERSIONS, STAMP))
    with pytest.raises(ValueError, match="restores no version"):
        restored.model_validate({**restored.model_dump(), "refused": "nope"})
