"""The result types: exactly the keys the projections write (documents built by the projection
functions on a read model in memory), and their JSON decoding (the HTTP client's results carry
the same types as the in-process clients', times as `datetime`, keys not declared kept)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from events.codec import AnyEvent
from events.forgetting import MemoryExpired
from handlers.erasure_receipts import with_progress
from memstream.sdk.results import (
    ErasureReceipt,
    Evidence,
    LlmCost,
    Memory,
    MemoryLogEntry,
    MemoryVersion,
    Profile,
    ProfileField,
    Provenance,
    Rollback,
    Save,
    SearchHit,
    Snapshot,
    SnapshotExtraction,
    Supersession,
    Turn,
    TurnPrincipal,
    from_json,
)
from memstream.sdk.search_index import INDEXED_FIELDS, UserIndex
from projections.apply import apply_event
from projections.store import (
    ERASURES,
    MEMORIES,
    MEMORY_EVENTS,
    PROFILES,
    ROLLBACKS,
    SAVES,
    SNAPSHOTS,
    TURNS,
)
from tests import factories as f
from tests.projections.test_forgetting import (
    PARTITIONS,
    forget_memory_home,
    forget_session_s2,
    forget_user_tim,
    world,
)
from tests.support.results import ReadModelInMemory, assert_conforms

AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def memory_json() -> dict[str, object]:
    return {
        "_id": "m1:1",
        "memory_id": "m1",
        "text": "The user lives in Porto.",
        "created_at": "2026-12-01T09:30:00+00:00",
        "updated_at": "2026-12-01T09:30:00Z",
        "expires_at": None,
        "superseded_by": {"version": 2, "at": "2026-12-01T09:30:00+00:00", "text": "x"},
        "evidence": [{"event_id": "e1", "observed_at": "2026-12-01T09:30:00+00:00"}],
        "attributes": {"since": "2026-12-01T09:30:00+00:00"},
        "a_field_from_a_newer_server": "kept",
    }


def test_times_a_memory_declares_are_parsed_at_every_depth_and_nothing_else() -> None:
    memory = from_json(memory_json(), Memory)
    assert memory["created_at"] == AT and memory["updated_at"] == AT
    assert memory["expires_at"] is None
    assert memory["superseded_by"]["at"] == AT
    assert memory["evidence"][0]["observed_at"] == AT
    assert memory["attributes"] == {"since": "2026-12-01T09:30:00+00:00"}  # free-form: as sent
    assert memory["a_field_from_a_newer_server"] == "kept"
    assert memory["text"] == "The user lives in Porto."


def test_lists_optionals_and_nested_log_entries_are_decoded() -> None:
    version = {**memory_json(), "created_by": {"occurred_at": "2026-12-01T09:30:00Z"}}
    (decoded,) = from_json([version], list[MemoryVersion])
    assert decoded["created_by"]["occurred_at"] == AT
    assert from_json(None, Profile | None) is None
    profile = from_json({"_id": "u", "fields": {"city": {"at": "2026-12-01T09:30:00Z"}}}, Profile)
    assert profile["fields"]["city"]["at"] == AT


def test_a_receipt_keeps_its_counts_and_parses_its_request_time() -> None:
    receipt = from_json(
        {"request_id": "r1", "requested_at": "2026-12-01T09:30:00Z", "seen_steps": {"turns": 2}},
        ErasureReceipt,
    )
    assert receipt["requested_at"] == AT and receipt["seen_steps"] == {"turns": 2}


# -- the types against the documents the projections write ---------------------------------------


def declared(kind: Any) -> frozenset[str]:
    """Every key the TypedDict `kind` declares, required or not."""
    keys: frozenset[str] = kind.__required_keys__ | kind.__optional_keys__
    return keys


def projected(log: Sequence[tuple[AnyEvent, int | None]]) -> ReadModelInMemory:
    """The read model `log` (events and their turns-topic partitions) makes."""
    db = ReadModelInMemory()
    for event, partition in log:
        apply_event(db, event, partition=partition)
    return db


def as_read(document: Mapping[str, Any]) -> dict[str, Any]:
    """A memory document as the reads hand it out: without its vector."""
    return {key: value for key, value in document.items() if key != "embedding"}


def test_a_new_memory_version_has_exactly_the_keys_memory_declares_nested_ones_too() -> None:
    memories = projected(world()).documents(MEMORIES)
    assert {m["status"] for m in memories} == {"current", "superseded"}
    for memory in memories:
        assert set(as_read(memory)) == declared(Memory)
        assert set(memory["provenance"]) == declared(Provenance)
        assert all(set(evidence) == declared(Evidence) for evidence in memory["evidence"])
    superseded = [m["superseded_by"] for m in memories if m["superseded_by"] is not None]
    assert superseded and all(set(s) == declared(Supersession) for s in superseded)


def test_memory_marks_optional_only_the_keys_older_documents_may_lack() -> None:
    assert Memory.__optional_keys__ == {"expires_at", "fingerprint", "retired_into"}


def test_an_erasure_receipt_marks_optional_the_keys_only_some_kinds_have() -> None:
    assert {"session_id", "memory_id", "memory_type", "steps"} <= ErasureReceipt.__optional_keys__
    assert {"request_id", "kind", "user_id", "complete"} <= ErasureReceipt.__required_keys__


def test_a_logged_memory_event_has_exactly_the_keys_memory_log_entry_declares() -> None:
    entries = projected(world()).documents(MEMORY_EVENTS)
    assert {e["event_type"] for e in entries} >= {"MemoryAdded", "MemoryReinforced"}
    assert all(set(entry) == declared(MemoryLogEntry) for entry in entries)


def test_a_memory_version_is_a_memory_with_the_events_that_made_and_reinforced_it() -> None:
    made = {"created_by", "reinforced_by", "rolled_back_by"}
    assert declared(MemoryVersion) == declared(Memory) | made
    assert MemoryVersion.__optional_keys__ == Memory.__optional_keys__


def test_a_search_hit_is_an_indexed_memory_without_its_vector_with_its_three_scores() -> None:
    memories = projected(world()).documents(MEMORIES)
    indexed = [{"_id": m["_id"], **{k: m[k] for k in INDEXED_FIELDS}} for m in memories]
    (kept, *_) = UserIndex.built(1, indexed).documents
    scores = {"score", "vector_score", "keyword_score"}
    assert set(kept) | scores == declared(SearchHit) == SearchHit.__required_keys__


def test_a_profile_and_its_fields_have_exactly_the_keys_their_types_declare() -> None:
    profiles = projected(world()).documents(PROFILES)
    assert {p["_id"] for p in profiles} == {"tim", "ann"}
    for profile in profiles:
        assert set(profile) == declared(Profile)
        assert all(set(field) == declared(ProfileField) for field in profile["fields"].values())


def test_a_turn_has_exactly_the_keys_turn_declares_its_principal_too() -> None:
    turns = projected(world()).documents(TURNS)
    assert all(set(turn) == declared(Turn) for turn in turns)
    sent = f.turn(principal=f.principal("application", "app"))
    (stored,) = projected([(sent, 0)]).documents(TURNS)
    assert set(stored["principal"]) == declared(TurnPrincipal)


def test_a_promoted_and_extracted_snapshot_has_every_key_snapshot_declares_and_no_other() -> None:
    snapshots = projected(world()).documents(SNAPSHOTS)
    assert snapshots
    for snapshot in snapshots:
        assert set(snapshot) == declared(Snapshot)
        for record in snapshot["extractions"].values():
            assert set(record) == declared(SnapshotExtraction)
            assert set(record["usage"]) == declared(LlmCost)


def test_a_snapshot_half_projected_lacks_only_what_its_other_half_writes() -> None:
    promoted = f.snapshot()
    (extracted_first,) = projected([(f.extracted(promoted, f.content()), 0)]).documents(SNAPSHOTS)
    assert set(extracted_first) == Snapshot.__required_keys__ | {"extractions"}
    (promoted_only,) = projected([(promoted, 0)]).documents(SNAPSHOTS)
    assert set(promoted_only) == declared(Snapshot) - {"extractions"}


def test_a_save_has_exactly_the_keys_save_declares() -> None:
    (save,) = projected(world()).documents(SAVES)
    assert set(save) == declared(Save)
    assert set(save["usage"]) == declared(LlmCost)


@pytest.mark.parametrize("to_version", [1, 4])
def test_a_rollback_restored_or_refused_has_exactly_the_keys_rollback_declares(
    to_version: int,
) -> None:
    from handlers.known_memory import evolve
    from handlers.rollback import rollback_decision, rollback_record, stored_version

    first, second = f.memory_added(memory_id="m-1"), f.memory_updated(memory_id="m-1")
    current = evolve({}, [first, second])["m-1"]
    request = f.rollback_request(to_version=to_version)
    versions = [stored_version(first), stored_version(second)]
    result = rollback_record(request, rollback_decision(request, current, versions, f.provenance()))
    log: list[tuple[AnyEvent, int | None]] = [(first, 0), (second, 0), (result, 0)]
    (rollback,) = projected(log).documents(ROLLBACKS)
    assert set(rollback) == declared(Rollback)


@pytest.mark.parametrize("erasure", [forget_memory_home, forget_session_s2, forget_user_tim])
def test_every_kind_of_erasure_receipt_conforms_to_erasure_receipt(
    erasure: Callable[[], list[tuple[AnyEvent, int | None]]],
) -> None:
    (receipt,) = projected([*world(), *erasure()]).documents(ERASURES)
    progress = with_progress(receipt, PARTITIONS)
    assert_conforms(progress, ErasureReceipt)


def test_a_receipt_a_stage_began_before_its_request_arrived_conforms_too() -> None:
    _request, *facts = forget_session_s2()
    (receipt,) = projected([*world(), *facts]).documents(ERASURES)
    progress = with_progress(receipt, PARTITIONS)
    assert_conforms(progress, ErasureReceipt)
    assert "requested_by" not in progress and "requested_at" not in progress


def test_an_expiry_receipt_names_its_memory_and_conforms() -> None:
    expired = MemoryExpired(
        event_id="expired-dog",
        occurred_at=f.CLOCK,
        user_id="tim",
        memory_id="m-dog",
        memory_type="semantic",
        expires_at=f.CLOCK,
    )
    (receipt,) = projected([*world(), (expired, 0)]).documents(ERASURES)
    progress = with_progress(receipt, PARTITIONS)
    assert_conforms(progress, ErasureReceipt)
    assert progress["kind"] == "expiry" and progress["memory_id"] == "m-dog"
