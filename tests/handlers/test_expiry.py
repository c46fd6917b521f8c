"""Expiry: the expiry a decision records, when a memory is due, and the command that forgets it."""

from __future__ import annotations

from datetime import timedelta

from events.memories import derived_id
from handlers.expiry import due_expiries, expiry_command, with_expiry
from handlers.forgetting import memories_forgotten, memories_to_forget
from handlers.known_memory import KnownMemory, evolve
from tests import factories as f

DAY = timedelta(days=1)


def known(*events: object) -> list[KnownMemory]:
    return list(evolve({}, events).values())  # type: ignore[arg-type]


def test_a_new_version_expires_its_retention_after_its_event_time() -> None:
    added, updated = f.memory_added(), f.memory_updated(occurred_at=f.CLOCK + DAY)
    stamped = with_expiry([added, updated], retention=30 * DAY)
    assert [d.expires_at for d in stamped] == [f.CLOCK + 30 * DAY, f.CLOCK + 31 * DAY]  # type: ignore[union-attr]


def test_a_requested_expiry_wins_over_the_retention_and_none_means_never() -> None:
    (stamped,) = with_expiry([f.memory_added()], retention=30 * DAY, requested=f.CLOCK + DAY)
    assert stamped.expires_at == f.CLOCK + DAY  # type: ignore[union-attr]
    (never,) = with_expiry([f.memory_added()], retention=None)
    assert never.expires_at is None  # type: ignore[union-attr]


def test_a_reinforcement_is_left_as_it_is() -> None:
    reinforced = f.memory_reinforced()
    assert with_expiry([reinforced], retention=DAY) == [reinforced]


def test_the_known_memory_carries_its_current_versions_expiry() -> None:
    (memory,) = known(
        f.memory_added(memory_id="m", expires_at=f.CLOCK + DAY),
        f.memory_updated(memory_id="m", expires_at=f.CLOCK + 9 * DAY),
    )
    assert memory.expires_at == f.CLOCK + 9 * DAY


def test_only_memories_due_at_the_time_get_a_command_identified_by_memory_and_expiry() -> None:
    memories = known(
        f.memory_added(memory_id="due", expires_at=f.CLOCK),
        f.memory_added(memory_id="later", expires_at=f.CLOCK + DAY),
        f.memory_added(memory_id="never"),
    )
    (command,) = due_expiries(memories, "semantic", f.CLOCK)
    assert command.memory_id == "due" and command.occurred_at == f.CLOCK
    assert command.event_id == derived_id("expired", "due", f.CLOCK.isoformat())
    assert due_expiries(memories, "semantic", f.CLOCK) == [command]  # a repeat is the same command


def test_an_expiry_command_forgets_the_memory_only_while_that_version_is_current() -> None:
    (memory,) = known(f.memory_added(memory_id="m", expires_at=f.CLOCK))
    command = expiry_command(memory, "semantic")
    assert memories_to_forget(command, [memory]) == ("m",)
    (renewed,) = known(
        f.memory_added(memory_id="m", expires_at=f.CLOCK),
        f.memory_updated(memory_id="m", expires_at=f.CLOCK + DAY),
    )
    assert memories_to_forget(command, [renewed]) == ()
    assert memories_to_forget(command, []) == ()
    fact = memories_forgotten(command, "semantic", ["m"])
    assert (fact.scope, fact.request_id, fact.memory_ids) == ("expiry", command.event_id, ("m",))
