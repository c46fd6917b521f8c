"""Forgetting in a memory type's stage: which memories a request erases, and the fact it writes."""

from __future__ import annotations

from events.memories import derived_id
from handlers.forgetting import (
    applies_to_type,
    forget_again,
    forget_ahead,
    forgotten_fact_id,
    memories_forgotten,
    memories_to_forget,
)
from handlers.known_memory import KnownMemory, evolve, origin_of
from handlers.window import sessions_forgotten
from tests import factories as f


def known_after(*events: object) -> list[KnownMemory]:
    return list(evolve({}, events).values())  # type: ignore[arg-type]


def test_a_version_learned_in_a_session_has_that_session_as_origin() -> None:
    assert origin_of(f.memory_added()) == (f"session:{f.SESSION_ID}",)


def test_a_direct_save_is_a_save_origin_and_names_its_session_if_it_has_one() -> None:
    sdk = f.evidence(source="sdk", snapshot_id=None, session_id=None)
    in_session = f.evidence(source="sdk", snapshot_id=None, session_id="s9")
    assert origin_of(f.memory_added(evidence=sdk)) == ("save",)
    assert origin_of(f.memory_added(evidence=in_session)) == ("session:s9", "save")


def test_an_update_keeps_the_origins_of_earlier_versions() -> None:
    added = f.memory_added(memory_id="m-1")
    updated = f.memory_updated(memory_id="m-1", evidence=f.evidence(session_id="s2"))
    (memory,) = known_after(added, updated)
    assert memory.origins == ("session:s1", "session:s2")


def test_a_session_forget_erases_every_memory_with_a_version_from_its_sessions() -> None:
    known = known_after(
        f.memory_added(memory_id="from-s1"),
        f.memory_added(memory_id="from-s2", evidence=f.evidence(session_id="s2")),
        f.memory_added(memory_id="updated-in-s2"),
        f.memory_updated(memory_id="updated-in-s2", evidence=f.evidence(session_id="s2")),
        f.memory_added(memory_id="saved", evidence=f.evidence(source="sdk", session_id=None)),
    )
    request = sessions_forgotten(f.session_forgotten(session_id="s2"), ["s2"], 0)
    assert memories_to_forget(request, known) == ("from-s2", "updated-in-s2")


def test_a_reinforcement_from_a_session_does_not_make_the_memory_its_own() -> None:
    added = f.memory_added(memory_id="m-1")
    reinforced = f.memory_reinforced(memory_id="m-1", evidence=f.evidence(session_id="s2"))
    request = sessions_forgotten(f.session_forgotten(session_id="s2"), ["s2"], 0)
    assert memories_to_forget(request, known_after(added, reinforced)) == ()


def test_the_users_snapshots_topic_copy_erases_the_memories_of_direct_saves() -> None:
    known = known_after(
        f.memory_added(memory_id="learned"),
        f.memory_added(memory_id="saved", evidence=f.evidence(source="sdk", session_id=None)),
    )
    assert memories_to_forget(f.user_forgotten(), known) == ("saved",)


def test_a_memory_request_names_its_memory_even_when_the_stage_does_not_know_it() -> None:
    assert memories_to_forget(f.memory_forgotten(memory_id="gone"), []) == ("gone",)


def test_only_the_stage_of_the_memorys_type_acts_on_a_memory_request() -> None:
    request = f.memory_forgotten(memory_type="episodic")
    assert applies_to_type(request, "episodic")
    assert not applies_to_type(request, "semantic")
    assert applies_to_type(f.user_forgotten(), "semantic")


def test_the_fact_is_identified_by_type_and_input_and_carries_no_content() -> None:
    request = f.memory_forgotten(memory_id="m-1")
    fact = memories_forgotten(request, "semantic", ["m-1"])
    assert fact.event_id == derived_id("memories-forgotten", "semantic", request.event_id)
    assert memories_forgotten(request, "semantic", ["m-1"]) == fact  # a redelivery: same record
    assert (fact.request_id, fact.scope, fact.memory_ids) == (request.event_id, "memory", ("m-1",))
    assert memories_forgotten(request, "episodic", []).event_id != fact.event_id


def test_a_windows_fact_names_the_request_and_its_sessions() -> None:
    request = f.session_forgotten()
    window_fact = sessions_forgotten(request, ["s1"], 2)
    fact = memories_forgotten(window_fact, "semantic", [])
    assert (fact.request_id, fact.scope, fact.session_ids) == (request.event_id, "session", ("s1",))
    user_fact = memories_forgotten(f.user_forgotten(), "semantic", [])
    assert (user_fact.scope, user_fact.saves) == ("user", True)


def test_a_snapshot_whose_session_is_forgotten_further_on_is_not_extracted() -> None:
    snapshot = f.snapshot()
    request = f.session_forgotten()
    other_session = sessions_forgotten(f.session_forgotten(session_id="s2"), ["s2"], 0)
    other_user = sessions_forgotten(f.session_forgotten(user_id="u2"), ["s1"], 0)
    assert forget_ahead(snapshot, [f.save_request(), other_session, other_user]) is None
    later = [f.snapshot(turns=[{"content": "later"}]), sessions_forgotten(request, ["s1"], 1)]
    assert forget_ahead(snapshot, later) == request.event_id


def test_the_users_own_copy_also_erases_memories_learned_before_origins_were_recorded() -> None:
    (legacy,) = known_after(f.memory_added(memory_id="legacy"))
    legacy = legacy.model_copy(update={"origins": ()})
    assert memories_to_forget(f.user_forgotten(), [legacy]) == ("legacy",)
    request = sessions_forgotten(f.session_forgotten(), ["s1"], 0)
    assert memories_to_forget(request, [legacy]) == ()


def test_a_request_read_again_after_its_fact_erases_nothing_when_nothing_came_back() -> None:
    request = sessions_forgotten(f.session_forgotten(), [f.SESSION_ID], 0)
    assert forget_again(request, "semantic", []) is None


def test_a_request_read_again_erases_what_a_replayed_snapshot_learned_again() -> None:
    """A crash between a snapshot and its session's forget: both are applied again, and the
    snapshot's memory (its result no longer in the read model) came back; the forget read again
    writes a fact of its own for it, since its first fact is already written."""
    request = sessions_forgotten(f.session_forgotten(), [f.SESSION_ID], 0)
    known = known_after(f.memory_added(memory_id="m-1"))
    again = forget_again(request, "semantic", known)
    assert again is not None and again.memory_ids == ("m-1",)
    assert again.event_id != forgotten_fact_id(request, "semantic")
    assert again.event_id == forget_again(request, "semantic", known).event_id  # type: ignore[union-attr]
    assert again.request_id == request.request_id


def test_a_memory_request_read_again_names_its_memory_only_if_it_is_known_again() -> None:
    request = f.memory_forgotten(memory_id="m-1")
    assert forget_again(request, "semantic", []) is None
    known = known_after(f.memory_added(memory_id="m-1"))
    assert forget_again(request, "semantic", known) is not None


def test_the_first_fact_of_a_request_has_the_requests_fact_id() -> None:
    request = f.memory_forgotten(memory_id="m-1")
    fact = memories_forgotten(request, "semantic", ["m-1"])
    assert fact.event_id == forgotten_fact_id(request, "semantic")
