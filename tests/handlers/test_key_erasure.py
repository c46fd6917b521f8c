"""Which data keys each forgetting record destroys."""

from __future__ import annotations

from events.forgetting import MemoriesForgotten
from handlers.key_erasure import KeyErasure, keys_to_destroy
from tests import factories as f


def fact(scope: str, **fields: object) -> MemoriesForgotten:
    return MemoriesForgotten(
        event_id="fact-1",
        occurred_at=f.CLOCK,
        request_id="req-1",
        scope=scope,  # type: ignore[arg-type]
        user_id=f.USER_ID,
        memory_type="semantic",
        **fields,  # type: ignore[arg-type]
    )


def test_a_session_request_destroys_the_sessions_keys_created_until_it() -> None:
    request = f.session_forgotten()
    plan = keys_to_destroy(request)
    assert plan is not None and plan.request_id == request.event_id and plan.step == "turns"
    assert plan.erasures == (
        KeyErasure(request.user_id, "session", request.session_id, request.occurred_at),
    )


def test_each_turns_copy_of_a_user_request_destroys_every_key_of_the_user() -> None:
    plan = keys_to_destroy(f.user_forgotten(turns_partition=2))
    assert plan is not None and plan.step == "turns-2"
    assert plan.erasures == (KeyErasure(f.USER_ID, None, None, f.CLOCK),)
    assert keys_to_destroy(f.user_forgotten()) is None  # the snapshots copy: the stages answer


def test_a_stages_fact_destroys_its_memories_keys_whatever_their_age() -> None:
    plan = keys_to_destroy(fact("memory", memory_ids=("m1", "m2")))
    assert plan is not None and plan.request_id == "req-1" and plan.step == "memories-fact-1"
    assert plan.erasures == (
        KeyErasure(f.USER_ID, "memory", "m1", None),
        KeyErasure(f.USER_ID, "memory", "m2", None),
    )


def test_a_stages_fact_of_a_session_or_user_request_destroys_their_keys_again() -> None:
    session = keys_to_destroy(fact("session", memory_ids=("m1",), session_ids=("s1",)))
    assert session is not None
    assert session.erasures[-1] == KeyErasure(f.USER_ID, "session", "s1", f.CLOCK)
    user = keys_to_destroy(fact("user"))
    assert user is not None and user.erasures == (KeyErasure(f.USER_ID, None, None, f.CLOCK),)
