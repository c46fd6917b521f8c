"""Sealing events where they become records and opening them where they are read back."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from events.codec import decode, encode
from events.memories import MemoryReinforced
from events.saves import MemorySaved
from handlers.sealed_events import (
    FORGOTTEN_FAILURE,
    KeyNotCached,
    NoKeyStore,
    has_sealed_content,
    opener,
    sealer,
)
from handlers.sealing import (
    DataKey,
    KeyDestroyed,
    KeyScope,
    SealBroken,
)
from handlers.snapshot_size import snapshot_turn_bytes
from tests import factories as f
from tests.support.keys import Ring

SECRETS = ("I work at Stripe", "Stripe", "Tim")


def sealed(event: Any, ring: Ring) -> bytes:
    return encode(event, sealer(ring))


def opened(data: bytes, ring: Ring | None) -> Any:
    return decode(data, opener(ring))


def test_a_sealed_turn_holds_no_plaintext_and_opens_to_the_same_turn() -> None:
    ring = Ring()
    turn = f.turn(content="I work at Stripe", name="Tim")
    data = sealed(turn, ring)
    assert not any(secret.encode() in data for secret in SECRETS)
    assert b'"algorithm":"AES-256-GCM"' in data
    assert opened(data, ring) == turn
    assert ring.made == [("session", turn.user_id, turn.session_id)]


def test_sealing_the_same_turn_twice_writes_the_same_bytes() -> None:
    turn = f.turn(content="I work at Stripe")
    ring = Ring()
    assert sealed(turn, ring) == sealed(turn, ring)


def test_a_turn_sealed_into_a_snapshot_keeps_the_bytes_it_had_on_the_turns_topic() -> None:
    ring = Ring()
    turn = f.turn(content="I work at Stripe")
    snap = f.snapshot(turns=(f.snapshot_turn(turn),))
    turn_content = orjson.loads(sealed(turn, ring))["content"]
    assert orjson.loads(sealed(snap, ring))["turns"][0]["content"] == turn_content
    assert opened(sealed(snap, ring), ring) == snap


def test_the_window_budget_counts_a_turn_at_its_sealed_size() -> None:
    ring = Ring()
    for text in ("hi", "I work at Stripe " * 300, "ünïcödé ✓ " * 50):
        turn = f.snapshot_turn(f.turn(content=text, name="Tim"))
        snap = f.snapshot(turns=(turn, turn))
        one = len(sealed(f.snapshot(turns=(turn,)), ring))
        assert len(sealed(snap, ring)) - one == snapshot_turn_bytes(turn, sealed=True)


def test_memory_decisions_are_sealed_with_their_memorys_key() -> None:
    ring = Ring()
    result = f.extracted(None, f.content(text="The user works at Stripe."))
    data = sealed(result, ring)
    assert b"Stripe" not in data
    decision = result.decisions[0]
    assert ("memory", decision.user_id, decision.memory_id) in ring.made
    assert opened(data, ring) == result


def test_a_destroyed_session_key_forgets_the_turn_whole() -> None:
    ring = Ring()
    turn = f.turn(content="I work at Stripe")
    data = sealed(turn, ring)
    ring.destroy("session", turn.user_id, turn.session_id)
    with pytest.raises(KeyDestroyed):
        opened(data, ring)


def test_a_destroyed_memory_key_drops_only_that_decision() -> None:
    ring = Ring()
    result = f.extracted(None, f.content(text="Works at Stripe."), f.content(text="Plays chess."))
    data = sealed(result, ring)
    gone, kept = result.decisions
    ring.destroy("memory", gone.user_id, gone.memory_id)
    assert opened(data, ring).decisions == (kept,)


def test_a_failure_whose_session_key_is_destroyed_reads_as_forgotten() -> None:
    ring = Ring()
    result = f.extracted(None, failure="invalid LLM output: 'I work at Stripe'")
    data = sealed(result, ring)
    assert b"Stripe" not in data
    assert opened(data, ring).failure == result.failure
    ring.destroy("session", result.user_id, result.session_id)
    assert opened(data, ring).failure == FORGOTTEN_FAILURE


def test_a_save_is_sealed_with_the_users_key_and_its_result_with_the_memorys() -> None:
    ring = Ring()
    request = f.save_request(content=f.content(text="The user works at Stripe."))
    assert b"Stripe" not in sealed(request, ring)
    assert opened(sealed(request, ring), ring) == request
    assert ring.made == [("user", request.user_id, None)]
    reinforced = f.memory_reinforced(merged_attributes={"employer": "Stripe"}, reason="Stripe")
    saved = MemorySaved(
        event_id="save-result",
        occurred_at=request.occurred_at,
        save_id=request.event_id,
        user_id=reinforced.user_id,
        memory_type="semantic",
        decisions=(reinforced,),
    )
    assert b"Stripe" not in sealed(saved, ring)
    assert opened(sealed(saved, ring), ring) == saved


def test_a_rollbacks_restored_content_is_sealed_and_forgotten_with_its_memory() -> None:
    from handlers.known_memory import evolve
    from handlers.rollback import rollback_decision, rollback_record, stored_version

    ring = Ring()
    first = f.memory_added(memory_id="m-1", content=f.content(text="The user works at Stripe."))
    second = f.memory_updated(memory_id="m-1")
    request = f.rollback_request(reason="the update was wrong")
    assert opened(sealed(request, ring), ring) == request
    current = evolve({}, [first, second])["m-1"]
    versions = [stored_version(first), stored_version(second)]
    result = rollback_record(request, rollback_decision(request, current, versions, f.provenance()))
    data = sealed(result, ring)
    assert b"Stripe" not in data
    assert opened(data, ring) == result
    ring.destroy("memory", result.user_id, "m-1")
    forgotten = opened(data, ring)  # read, not poison: the decision goes with its memory
    assert (forgotten.decisions, forgotten.refused) == ((), None)
    assert forgotten.requested_by == "cli:alice"


def test_a_lone_memory_event_is_sealed_and_forgotten_whole() -> None:
    ring = Ring()
    event: MemoryReinforced = f.memory_reinforced(reason="restated: works at Stripe")
    data = sealed(event, ring)
    assert b"Stripe" not in data
    ring.destroy("memory", event.user_id, event.memory_id)
    with pytest.raises(KeyDestroyed):
        opened(data, ring)


def test_plaintext_records_read_as_before_with_or_without_keys() -> None:
    turn = f.turn(content="I work at Stripe")
    assert opened(encode(turn), Ring()) == turn
    assert opened(encode(turn), None) == turn
    assert not has_sealed_content(orjson.loads(encode(turn)))


def test_a_reader_without_keys_refuses_sealed_content_as_an_outage_not_as_poison() -> None:
    data = sealed(f.turn(content="I work at Stripe"), Ring())
    with pytest.raises(NoKeyStore):
        opened(data, None)


@pytest.mark.parametrize("field", ["ciphertext", "key_id"])
def test_a_tampered_sealed_value_does_not_open(field: str) -> None:
    ring = Ring()
    payload = orjson.loads(sealed(f.turn(content="I work at Stripe"), ring))
    other_turn = f.turn(session_id="another-session", content="Something else entirely")
    other = orjson.loads(sealed(other_turn, ring))
    payload["content"][field] = other["content"][field]
    with pytest.raises(SealBroken):
        opened(orjson.dumps(payload), ring)


def test_a_sealed_value_moved_to_another_turn_does_not_open() -> None:
    ring = Ring()
    first, second = f.turn(content="I work at Stripe"), f.turn(content="Hello")
    payload = orjson.loads(sealed(second, ring))
    payload["content"] = orjson.loads(sealed(first, ring))["content"]
    with pytest.raises(SealBroken):
        opened(orjson.dumps(payload), ring)


def test_a_ring_that_misses_a_key_says_how_to_fetch_it() -> None:
    fetched: list[str] = []

    class Cold(Ring):
        def sealing_key(self, scope: KeyScope, owner: str, subject: str | None) -> DataKey:
            raise KeyNotCached("a session key", lambda: fetched.append(owner))

    with pytest.raises(KeyNotCached) as missed:
        sealed(f.turn(), Cold())
    missed.value.fetch()
    assert fetched == [f.turn().user_id]


def test_a_stored_windows_topic_is_sealed_with_its_turns_and_emptied_when_forgotten() -> None:
    from handlers.sealed_events import open_window, seal_window, without_sealed_turns
    from handlers.session_window import SessionWindow

    ring = Ring()
    window = SessionWindow(
        user_id="u1",
        session_id="s1",
        turns=(f.snapshot_turn(content="I work at Stripe"),),
        topic=(0.25, -0.5),
        topic_model="m",
        topic_turns=1,
    )
    stored = orjson.dumps(seal_window(window.model_dump(mode="json"), ring))
    assert b"Stripe" not in stored and b"0.25" not in stored
    opened_back = open_window(orjson.loads(stored), ring)
    assert SessionWindow.model_validate(opened_back) == window
    facts = SessionWindow.model_validate(without_sealed_turns(orjson.loads(stored)))
    assert (facts.topic, facts.topic_turns, facts.turns[0].content) == ((), 1, "")
