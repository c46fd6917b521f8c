"""The memories a stage keeps in its table: forgetting them, and finding those that expire."""

from __future__ import annotations

import pytest

from handlers.reconcile import evolve
from handlers.sealed_events import NoKeyStore
from handlers.sealing import data_key_id
from streams.memory_state import KnownMemories
from tests import factories as f
from tests.support.keys import Ring


def kept(*events: object) -> tuple[dict[bytes, bytes | None], KnownMemories]:
    table: dict[bytes, bytes | None] = {}
    memories = KnownMemories(table)
    memories.store("u1", {}, evolve({}, events))  # type: ignore[arg-type]
    return table, memories


def test_only_memories_with_an_expiry_are_read_for_the_expiry_timer() -> None:
    _, memories = kept(
        f.memory_added(memory_id="never"), f.memory_added(memory_id="due", expires_at=f.CLOCK)
    )
    assert [memory.memory_id for memory in memories.expiring()] == ["due"]


def test_a_forgotten_memory_leaves_the_table_and_the_users_index() -> None:
    table, memories = kept(f.memory_added(memory_id="a"), f.memory_added(memory_id="b"))
    memories.forget("u1", ["a"])
    assert [memory.memory_id for memory in memories.all_of("u1")] == ["b"]
    assert b"\x00m|u1|a" not in table


def test_stored_memories_are_sealed_and_open_for_reconciliation() -> None:
    ring = Ring()
    table: dict[bytes, bytes | None] = {}
    memories = KnownMemories(table, ring, seal=True)
    added = f.memory_added(memory_id="a", content=f.content(text="The user works at Stripe."))
    memories.store("u1", {}, evolve({}, [added]))
    assert b"Stripe" not in b"".join(v for v in table.values() if v)
    assert memories.stored("u1").key_ids == {data_key_id("memory", "u1", "a", 1)}
    (known,) = memories.stored("u1").opened(None).values()
    assert known.content.text == "The user works at Stripe." and known.embedding == added.embedding
    assert [m.memory_id for m in memories.all_of("u1")] == ["a"]  # no key needed


def test_a_memory_whose_key_was_destroyed_is_passed_over() -> None:
    ring = Ring()
    memories = KnownMemories({}, ring, seal=True)
    memories.store("u1", {}, evolve({}, [f.memory_added(memory_id="a")]))
    ring.destroy("memory", "u1", "a")
    assert memories.stored("u1").opened(None) == {}


def test_a_stage_without_keys_waits_on_sealed_memories_rather_than_losing_them() -> None:
    table: dict[bytes, bytes | None] = {}
    KnownMemories(table, Ring(), seal=True).store(
        "u1", {}, evolve({}, [f.memory_added(memory_id="a")])
    )
    with pytest.raises(NoKeyStore):
        KnownMemories(table).stored("u1").opened(None)
