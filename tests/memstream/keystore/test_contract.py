"""The contract of the `handlers.ports.DataKeys` port, run against each implementation: the
MongoDB store (on SecantusDB) and the in-memory one. `Stores.process()` is the store as one
more process holds it: over the same keys (database or vault), with its own memory."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from handlers.key_ring import StoreKeyRing
from handlers.ports import DataKeys
from handlers.sealed_events import KeyNotCached
from handlers.sealing import (
    DataKey,
    KeyDestroyed,
    UnknownKey,
    associated_data,
    open_text,
    seal_text,
)
from memstream.keystore.in_memory import InMemoryDataKeys, KeyVault
from memstream.keystore.mongo import MongoDataKeys
from tests.memstream.keystore.conftest import START, Clock

Material = Callable[[], bytes]


class Stores:
    """Makes stores of one implementation over one set of keys."""

    def __init__(self, make: Callable[[Material | None], DataKeys]) -> None:
        self._make = make

    def process(self, material: Material | None = None) -> DataKeys:
        store = self._make(material)
        store.prepare()
        return store


@pytest.fixture(params=[pytest.param("mongo", marks=pytest.mark.integration), "in_memory"])
def stores(request: pytest.FixtureRequest, clock: Clock) -> Stores:
    if request.param == "in_memory":
        vault = KeyVault()

        def in_memory(material: Material | None) -> DataKeys:
            if material is None:
                return InMemoryDataKeys(vault, clock=clock)
            return InMemoryDataKeys(vault, clock=clock, random_material=material)

        return Stores(in_memory)
    db = request.getfixturevalue("db")

    def on_mongo(material: Material | None) -> DataKeys:
        if material is None:
            return MongoDataKeys(db, clock=clock)
        return MongoDataKeys(db, clock=clock, random_material=material)

    return Stores(on_mongo)


# ---- creation ----------------------------------------------------------------------------------


def test_the_first_key_of_a_session_is_generation_one_and_every_process_gets_it(
    stores: Stores,
) -> None:
    first = stores.process().current("session", "u1", "s1")
    again = stores.process().current("session", "u1", "s1")
    assert again == first and len(first.material) == 32
    (record,) = stores.process().records("u1")
    assert (record.scope, record.subject, record.generation) == ("session", "s1", 1)
    assert record.created_at == START and record.destroyed_at is None


def at_once(racing: list[DataKeys], subject: str) -> list[DataKey]:
    """`current` of one session's key called by every store in its own thread, released together."""
    barrier = threading.Barrier(len(racing))
    got: list[DataKey | None] = [None] * len(racing)

    def create(index: int) -> None:
        barrier.wait()
        got[index] = racing[index].current("session", "u1", subject)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(len(racing))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(key is not None for key in got), "a creating thread failed"
    return [key for key in got if key is not None]


def racing_stores(stores: Stores, processes: int = 8) -> list[DataKeys]:
    """Stores as separate processes hold them, each drawing different material."""
    return [stores.process(lambda i=i: bytes([i]) * 32) for i in range(processes)]  # type: ignore[misc]


@pytest.mark.parametrize("round_", range(3))
def test_processes_creating_a_session_key_at_once_end_with_the_same_key(
    stores: Stores, round_: int
) -> None:
    got = at_once(racing_stores(stores), f"s{round_}")
    assert len({(key.key_id, key.material) for key in got}) == 1
    assert len(stores.process().records("u1")) == 1


def test_processes_creating_the_next_generation_at_once_end_with_the_same_key(
    stores: Stores,
) -> None:
    racing = racing_stores(stores)
    first = racing[0].current("session", "u1", "s1")
    racing[0].destroy("u1", "session", "s1")
    got = at_once(racing[1:], "s1")  # they never held generation 1: they read it destroyed
    assert len({(key.key_id, key.material) for key in got}) == 1
    assert got[0].key_id != first.key_id
    assert [r.generation for r in racing[0].records("u1")] == [1, 2]


def test_session_memory_and_user_keys_of_one_user_are_distinct(stores: Stores) -> None:
    keys = stores.process()
    found = {
        keys.current("session", "u1", "s1"),
        keys.current("session", "u1", "s2"),
        keys.current("memory", "u1", "m1"),
        keys.current("user", "u1"),
        keys.current("user", "u2"),
    }
    assert len({key.key_id for key in found}) == 5
    assert len({key.material for key in found}) == 5


def test_a_key_id_never_stored_is_unknown_not_destroyed(stores: Stores) -> None:
    keys = stores.process()
    with pytest.raises(UnknownKey):
        keys.key("no-such-key")
    with pytest.raises(UnknownKey):
        keys.load(["no-such-key"])


def test_keys_loaded_at_once_are_answered_without_a_lookup(stores: Stores) -> None:
    made = [stores.process().current("session", "u1", f"s{i}") for i in range(3)]
    reader = stores.process()
    reader.load([key.key_id for key in made])
    assert [reader.cached_key(key.key_id) for key in made] == [(True, key) for key in made]


# ---- destruction and generations ---------------------------------------------------------------


def test_destroying_a_session_key_forgets_its_content_in_every_process(
    stores: Stores, clock: Clock
) -> None:
    keys = stores.process()
    key = keys.current("session", "u1", "s1")
    turn = associated_data("t1", "content")
    sealed = seal_text("I am pregnant.", key, associated=turn, nonce=bytes(12))
    clock.advance(60)
    assert keys.destroy("u1", "session", "s1") == (key.key_id,)
    (record,) = keys.records("u1")
    assert record.destroyed_at == START + timedelta(seconds=60) and record.kek is None
    for reader in (keys, stores.process()):  # this process and a fresh one
        with pytest.raises(KeyDestroyed):
            open_text(sealed, reader.key(sealed.key_id), associated=turn)


def test_destroying_again_destroys_nothing_and_reports_nothing(
    stores: Stores, clock: Clock
) -> None:
    keys = stores.process()
    keys.current("session", "u1", "s1")
    assert len(keys.destroy("u1", "session", "s1")) == 1
    clock.advance(60)
    assert keys.destroy("u1", "session", "s1") == ()
    (record,) = keys.records("u1")
    assert record.destroyed_at == START  # the first destruction's time is kept


def test_a_session_used_again_after_its_key_was_destroyed_gets_a_new_generation(
    stores: Stores,
) -> None:
    keys = stores.process()
    first = keys.current("session", "u1", "s1")
    keys.destroy("u1", "session", "s1")
    second = keys.current("session", "u1", "s1")
    assert second.key_id != first.key_id and second.material != first.material
    assert stores.process().current("session", "u1", "s1") == second  # another process agrees
    assert [(r.generation, r.destroyed_at is None) for r in keys.records("u1")] == [
        (1, False),
        (2, True),
    ]
    assert keys.key(first.key_id) is None


def test_forgetting_a_user_destroys_every_key_of_theirs_and_no_one_elses(stores: Stores) -> None:
    keys = stores.process()
    theirs = {
        keys.current("session", "u1", "s1").key_id,
        keys.current("memory", "u1", "m1").key_id,
        keys.current("user", "u1").key_id,
    }
    other = keys.current("session", "u2", "s1")
    assert set(keys.destroy("u1")) == theirs
    assert all(keys.key(key_id) is None for key_id in theirs)
    assert keys.key(other.key_id) == other


def test_forgetting_a_memory_destroys_only_that_memorys_key(stores: Stores) -> None:
    keys = stores.process()
    forgotten = keys.current("memory", "u1", "m1")
    kept = [keys.current("memory", "u1", "m2"), keys.current("session", "u1", "m1")]
    assert keys.destroy("u1", "memory", "m1") == (forgotten.key_id,)
    assert [keys.key(key.key_id) for key in kept] == kept


def test_a_late_request_spares_keys_created_after_it(stores: Stores, clock: Clock) -> None:
    keys = stores.process()
    before = keys.current("session", "u1", "s1")
    requested_at = clock()
    clock.advance(10)
    keys.destroy("u1", "session", "s1")
    after = keys.current("session", "u1", "s1")  # generation 2, created after the request
    clock.advance(10)
    assert keys.destroy("u1", "session", "s1", created_until=requested_at) == ()
    assert keys.key(after.key_id) == after and keys.key(before.key_id) is None


def test_a_subject_without_a_scope_or_an_unknown_scope_is_refused(stores: Stores) -> None:
    keys = stores.process()
    with pytest.raises(ValueError, match="within a scope"):
        keys.destroy("u1", subject="s1")
    with pytest.raises(ValueError, match="unknown key scope"):
        keys.destroy("u1", "turn")  # type: ignore[arg-type]


def test_after_destroy_the_destroying_process_never_returns_the_material(stores: Stores) -> None:
    keys = stores.process()
    key = keys.current("session", "u1", "s1")
    assert keys.key(key.key_id) == key
    keys.destroy("u1", "session", "s1")
    assert keys.key(key.key_id) is None
    assert keys.cached_key(key.key_id) == (True, None)
    assert keys.cached_current("session", "u1", "s1") is None
    assert keys.current("session", "u1", "s1").key_id != key.key_id


# ---- the key ring over the store ---------------------------------------------------------------


def test_a_ring_names_the_lookup_a_new_key_needs_and_then_answers_from_memory(
    stores: Stores,
) -> None:
    ring = StoreKeyRing(stores.process())
    with pytest.raises(KeyNotCached) as missed:
        ring.sealing_key("session", "u1", "s1")
    made = missed.value.fetch()
    assert ring.sealing_key("session", "u1", "s1") == made
    assert StoreKeyRing(stores.process(), blocking=True).opening_key(made.key_id) == made


# ---- the receipt of a forget request -----------------------------------------------------------


@pytest.mark.integration
def test_a_forget_request_destroys_its_keys_once_and_counts_them_on_the_receipt(
    stores: Stores, db: Any
) -> None:
    from projections.key_erasure import destroy_forgotten_keys
    from projections.writes import LiveWrites
    from tests import factories as f

    keys = stores.process()
    keys.current("session", "u1", "s1")
    keys.current("session", "u1", "s2")
    request = f.session_forgotten(user_id="u1", session_id="s1", occurred_at=START)
    assert destroy_forgotten_keys(keys, LiveWrites(db), request) == 1
    assert destroy_forgotten_keys(keys, LiveWrites(db), request) == 0  # a redelivery
    receipt = db["erasures"].find_one({"_id": request.event_id})
    assert receipt["keys_destroyed"] == {"turns": 1}
    live = {(r.subject, r.destroyed_at is None) for r in keys.records("u1")}
    assert live == {("s1", False), ("s2", True)}


@pytest.mark.integration
def test_a_receipt_started_by_destroyed_keys_names_its_request_and_is_not_complete(
    stores: Stores, db: Any
) -> None:
    """The keys die before the record's erasure is projected: a reader polling the receipt
    meanwhile sees whose request it is, and no step yet."""
    from handlers.erasure_receipts import with_progress
    from projections.key_erasure import destroy_forgotten_keys
    from projections.writes import LiveWrites
    from tests import factories as f

    keys = stores.process()
    keys.current("session", "u1", "s1")
    request = f.session_forgotten(user_id="u1", session_id="s1", occurred_at=START)
    destroy_forgotten_keys(keys, LiveWrites(db), request)
    shown = with_progress(db["erasures"].find_one({"_id": request.event_id}), partitions=1)
    assert (shown["kind"], shown["user_id"], shown["session_id"]) == ("session", "u1", "s1")
    assert shown["complete"] is False
    assert shown["seen_steps"] == {"turns": 0, "snapshots": 0, "memories": 0}
