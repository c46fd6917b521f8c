"""When an erasure receipt is complete: the steps each kind of request must leave."""

from __future__ import annotations

from typing import Any

import pytest

from events import Principal
from handlers.erasure_receipts import (
    expected_steps,
    is_complete,
    requester,
    steps_seen,
    with_progress,
)


def steps(turns: int = 0, snapshots: int = 0, memories: int = 0) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    found.update({f"turns-{p}": {"topic": "turns", "turns": 1} for p in range(turns)})
    found.update(
        {f"snapshots-s{i}": {"topic": "snapshots", "snapshots": 0} for i in range(snapshots)}
    )
    found.update({f"memories-m{i}": {"topic": "memories", "memories": 1} for i in range(memories)})
    return found


def test_a_memory_request_expects_one_memories_step() -> None:
    assert expected_steps("memory", 8) == {"turns": 0, "snapshots": 0, "memories": 1}


def test_a_session_request_expects_a_turns_a_snapshots_and_one_step_per_memory_type() -> None:
    assert expected_steps("session", 8) == {"turns": 1, "snapshots": 1, "memories": 4}


def test_a_user_request_expects_every_partition_and_every_type_per_partition_and_saves() -> None:
    assert expected_steps("user", 3) == {"turns": 3, "snapshots": 3, "memories": 16}


def test_declared_custom_types_add_their_stages_steps() -> None:
    assert expected_steps("session", 8, types=6)["memories"] == 6
    assert expected_steps("user", 3, types=6)["memories"] == 24


@pytest.mark.parametrize(
    ("kind", "seen", "complete"),
    [
        ("memory", steps(), False),
        ("memory", steps(memories=1), True),
        ("session", steps(turns=1, snapshots=1, memories=3), False),
        ("session", steps(turns=1, memories=4), False),
        ("session", steps(turns=1, snapshots=1, memories=4), True),
        ("user", steps(turns=2, snapshots=2, memories=12), True),
        ("user", steps(turns=2, snapshots=1, memories=12), False),
        ("user", steps(turns=3, snapshots=3, memories=16), True),  # partitions raised since
    ],
)
def test_a_receipt_is_complete_once_every_topic_has_its_expected_steps(
    kind: Any, seen: dict[str, dict[str, Any]], complete: bool
) -> None:
    assert is_complete(kind, seen, partitions=2) is complete


def test_a_step_without_a_topic_field_counts_by_the_prefix_of_its_id() -> None:
    assert steps_seen({"turns-0": {}, "memories-x-y": {}, "other-1": {}}) == {
        "turns": 1,
        "snapshots": 0,
        "memories": 1,
    }


def test_with_progress_names_the_request_and_keeps_every_field() -> None:
    receipt = {"_id": "r1", "kind": "memory", "user_id": "u", "steps": steps(memories=1)}
    shown = with_progress(receipt, 4)
    assert shown["request_id"] == "r1" and shown["complete"] is True
    assert shown["seen_steps"] == {"turns": 0, "snapshots": 0, "memories": 1}
    assert {k: shown[k] for k in receipt} == receipt


def test_a_receipt_with_no_steps_yet_is_not_complete() -> None:
    assert with_progress({"_id": "r", "kind": "session", "user_id": "u"}, 4)["complete"] is False


def test_requested_by_is_the_acting_principal_else_the_fallback() -> None:
    assert requester(Principal(kind="application", id="acme")) == "application:acme"
    assert requester(Principal(kind="service_account", id="sa")) == "service_account:sa"
    assert requester(None) == "sdk"
    assert requester(None, "cli:alice") == "cli:alice"
