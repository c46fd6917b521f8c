"""What the MongoDB key store adds to the contract (tests/memstream/keystore/test_contract.py):
one document per key, material unset on destroy, the per-process cache and its window, and the
index it creates before its first lookup."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from handlers.key_ring import StoreKeyRing
from handlers.sealed_events import KeyNotCached
from memstream.keystore.mongo import DATA_KEYS, MongoDataKeys
from tests.memstream.keystore.conftest import START, Clock

pytestmark = pytest.mark.integration

Db = Any


def store(db: Db, clock: Clock, **options: Any) -> MongoDataKeys:
    """A key store as one process holds it (its own cache)."""
    keys = MongoDataKeys(db, clock=clock, **options)
    keys.prepare()
    return keys


def test_processes_creating_one_key_at_once_write_one_document(db: Db, clock: Clock) -> None:
    import threading

    racing = [store(db, clock, random_material=lambda i=i: bytes([i]) * 32) for i in range(8)]
    barrier = threading.Barrier(len(racing))

    def create(keys: MongoDataKeys) -> None:
        barrier.wait()
        keys.current("session", "u1", "s1")

    threads = [threading.Thread(target=create, args=(keys,)) for keys in racing]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert db[DATA_KEYS].count_documents({}) == 1


def test_destroying_a_key_unsets_its_material_in_the_database(db: Db, clock: Clock) -> None:
    keys = store(db, clock)
    key = keys.current("session", "u1", "s1")
    clock.advance(60)
    keys.destroy("u1", "session", "s1")
    document = db[DATA_KEYS].find_one({"_id": key.key_id})
    assert "material" not in document and "wrapped" not in document
    assert document["destroyed_at"] == START + timedelta(seconds=60)


# ---- the cache ---------------------------------------------------------------------------------


def test_a_lookup_that_read_the_key_just_before_a_destroy_does_not_return_it_after(
    db: Db, clock: Clock
) -> None:
    keys = store(db, clock)
    key = store(db, clock).current("session", "u1", "s1")
    real = keys._keys

    class DestroyAfterRead:
        """The collection, but a destroy lands between the lookup's read and its return."""

        def find_one(self, *args: Any, **kwargs: Any) -> Any:
            document = real.find_one(*args, **kwargs)
            keys._keys = real
            keys.destroy("u1", "session", "s1")
            return document

    keys._keys = DestroyAfterRead()  # type: ignore[assignment]
    assert keys.key(key.key_id) is None
    assert keys.key(key.key_id) is None  # and it was not cached either


def test_another_process_keeps_a_destroyed_key_until_its_cache_entry_expires(
    db: Db, clock: Clock
) -> None:
    """The documented cross-process window: `cache_ttl`, never longer."""
    other = store(db, clock, cache_ttl=timedelta(seconds=30))
    key = other.current("session", "u1", "s1")
    store(db, clock).destroy("u1", "session", "s1")
    clock.advance(29)
    assert other.key(key.key_id) == key
    assert other.current("session", "u1", "s1") == key
    clock.advance(1)
    assert other.key(key.key_id) is None
    assert other.current("session", "u1", "s1").key_id != key.key_id


def test_the_cache_keeps_at_most_its_size_and_reads_evicted_keys_back(db: Db, clock: Clock) -> None:
    keys = store(db, clock, cache_size=2)
    made = [keys.current("session", "u1", f"s{i}") for i in range(3)]
    assert len(keys._cache._entries) == 2
    assert [keys.key(key.key_id) for key in made] == made


def test_a_cold_ring_names_the_lookup_it_needs_and_then_answers_from_memory(
    db: Db, clock: Clock
) -> None:
    ring = StoreKeyRing(store(db, clock))
    with pytest.raises(KeyNotCached) as missed:
        ring.sealing_key("session", "u1", "s1")
    made = missed.value.fetch()
    assert ring.sealing_key("session", "u1", "s1") == made
    other = StoreKeyRing(store(db, clock))
    with pytest.raises(KeyNotCached) as missed:
        other.opening_key(made.key_id)
    missed.value.fetch()
    assert other.opening_key(made.key_id) == made


def test_a_ring_remembers_a_destroyed_key_without_asking_again(db: Db, clock: Clock) -> None:
    keys = store(db, clock)
    made = keys.current("session", "u1", "s1")
    store(db, clock).destroy("u1", "session", "s1")
    reader = StoreKeyRing(store(db, clock), blocking=True)
    assert reader.opening_key(made.key_id) is None
    db[DATA_KEYS].delete_many({})  # a second lookup would now raise UnknownKey
    assert reader.opening_key(made.key_id) is None
    assert reader.store.cached_key(made.key_id) == (True, None)


def test_the_store_creates_its_index_before_it_first_looks_a_subject_up(
    db: Db, clock: Clock
) -> None:
    MongoDataKeys(db, clock=clock).current("session", "u1", "s1")  # no prepare call
    names = {index["name"] for index in db[DATA_KEYS].list_indexes()}
    assert "owner_scope_subject_generation" in names
