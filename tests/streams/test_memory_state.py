"""The memories a stage keeps in its table: forgetting them, and finding those that expire."""

from __future__ import annotations

from handlers.reconcile import evolve
from streams.memory_state import KnownMemories
from tests import factories as f


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
