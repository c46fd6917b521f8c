"""The memories a stage reconciles against: the read model's with its own records laid over."""

from __future__ import annotations

from events.forgetting import MemoriesForgotten
from events.memories import MemoryEvent
from events.snapshots import SnapshotExtracted
from handlers.known_memory import KnownMemory, evolve
from handlers.known_state import is_own, with_own_records
from tests import factories as f


def read_model_after(*events: object) -> dict[str, KnownMemory]:
    """What the read model holds once the projector applied `events`."""
    return evolve({}, events)  # type: ignore[arg-type]


def result(*decisions: MemoryEvent) -> SnapshotExtracted:
    """A result record carrying `decisions`."""
    return f.extracted().model_copy(update={"decisions": decisions})


def forgot(*memory_ids: str) -> MemoriesForgotten:
    return MemoriesForgotten(
        event_id=f.next_id("forgotten"),
        occurred_at=f.at(0),
        request_id="req-1",
        scope="memory",
        user_id=f.USER_ID,
        memory_type="semantic",
        memory_ids=memory_ids,
    )


def test_a_result_the_read_model_lacks_is_laid_over_it() -> None:
    added = f.memory_added(memory_id="m-1")
    state = with_own_records({}, [result(added)])
    assert list(state) == ["m-1"]


def test_a_result_the_read_model_already_holds_changes_nothing() -> None:
    added = f.memory_added(memory_id="m-1")
    updated = f.memory_updated(memory_id="m-1", content=f.content(text="The user moved."))
    projected = read_model_after(added, updated)
    # the projector is past both, but its progress is not stored yet: both are laid over
    state = with_own_records(projected, [result(added), result(updated)])
    assert state == projected
    assert state["m-1"].version == 2


def test_an_update_of_a_projected_memory_replaces_it() -> None:
    added = f.memory_added(memory_id="m-1")
    updated = f.memory_updated(memory_id="m-1")
    state = with_own_records(read_model_after(added), [result(updated)])
    assert state["m-1"].version == 2


def test_a_forget_fact_removes_what_the_read_model_still_shows() -> None:
    added = f.memory_added(memory_id="m-1")
    state = with_own_records(read_model_after(added), [forgot("m-1")])
    assert state == {}


def test_records_apply_in_order_a_memory_forgotten_then_learned_again_stays() -> None:
    first = f.memory_added(memory_id="m-1")
    again = f.memory_added(memory_id="m-2")
    records = [result(first), forgot("m-1"), result(again)]
    assert list(with_own_records({}, records)) == ["m-2"]


def test_only_this_types_results_and_facts_are_its_own() -> None:
    assert is_own(f.extracted(), "semantic")
    assert not is_own(f.extracted(), "episodic")
    assert is_own(forgot("m-1"), "semantic")
    assert not is_own(f.memory_added(), "semantic")  # a bare memory event (release 0.1)
