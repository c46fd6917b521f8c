"""The data key store on SecantusDB: race-safe creation, generations, destruction, the cache."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo import MongoClient

from handlers.sealing import DataKey, KeyDestroyed, associated_data, open_text, seal_text
from projections.data_keys import DATA_KEYS, DataKeyStore, UnknownKey

pytestmark = pytest.mark.integration

Db = Any
START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def db(mongo: Any) -> Iterator[Db]:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    database = client[f"keys_{uuid.uuid4().hex[:10]}"]
    yield database
    client.drop_database(database.name)
    client.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def store(db: Db, clock: Clock, **options: Any) -> DataKeyStore:
    """A key store as one process holds it (its own cache)."""
    keys = DataKeyStore(db, clock=clock, **options)
    keys.ensure_indexes()
    return keys


# ---- creation ----------------------------------------------------------------------------------


def test_the_first_key_of_a_session_is_generation_one_and_every_process_gets_it(
    db: Db, clock: Clock
) -> None:
    first = store(db, clock).current("session", "u1", "s1")
    again = store(db, clock).current("session", "u1", "s1")  # another process, empty cache
    assert again == first and len(first.material) == 32
    (record,) = store(db, clock).records("u1")
    assert (record.scope, record.subject, record.generation) == ("session", "s1", 1)
    assert record.created_at == START and record.destroyed_at is None


def at_once(stores: list[DataKeyStore], subject: str) -> list[DataKey]:
    """`current` of one session's key called by every store in its own thread, released together."""
    barrier = threading.Barrier(len(stores))
    got: list[DataKey | None] = [None] * len(stores)

    def create(index: int) -> None:
        barrier.wait()
        got[index] = stores[index].current("session", "u1", subject)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(key is not None for key in got), "a creating thread failed"
    return [key for key in got if key is not None]


def racing_stores(db: Db, clock: Clock, processes: int = 8) -> list[DataKeyStore]:
    """Stores as separate processes hold them, each drawing different material."""
    return [store(db, clock, random_material=lambda i=i: bytes([i]) * 32) for i in range(processes)]


@pytest.mark.parametrize("round_", range(3))
def test_processes_creating_a_session_key_at_once_end_with_the_same_key(
    db: Db, clock: Clock, round_: int
) -> None:
    got = at_once(racing_stores(db, clock), f"s{round_}")
    assert len({(key.key_id, key.material) for key in got}) == 1
    assert db[DATA_KEYS].count_documents({}) == 1


def test_processes_creating_the_next_generation_at_once_end_with_the_same_key(
    db: Db, clock: Clock
) -> None:
    stores = racing_stores(db, clock)
    first = stores[0].current("session", "u1", "s1")
    stores[0].destroy("u1", "session", "s1")
    got = at_once(stores[1:], "s1")  # their caches are empty: they read generation 1 destroyed
    assert len({(key.key_id, key.material) for key in got}) == 1
    assert got[0].key_id != first.key_id
    assert [r.generation for r in stores[0].records("u1")] == [1, 2]


def test_session_memory_and_user_keys_of_one_user_are_distinct(db: Db, clock: Clock) -> None:
    keys = store(db, clock)
    found = {
        keys.current("session", "u1", "s1"),
        keys.current("session", "u1", "s2"),
        keys.current("memory", "u1", "m1"),
        keys.current("user", "u1"),
        keys.current("user", "u2"),
    }
    assert len({key.key_id for key in found}) == 5
    assert len({key.material for key in found}) == 5


def test_a_key_id_never_stored_is_unknown_not_destroyed(db: Db, clock: Clock) -> None:
    with pytest.raises(UnknownKey):
        store(db, clock).key("no-such-key")


# ---- destruction and generations ---------------------------------------------------------------


def test_destroying_a_session_key_unsets_its_material_and_its_content_is_forgotten(
    db: Db, clock: Clock
) -> None:
    keys = store(db, clock)
    key = keys.current("session", "u1", "s1")
    turn = associated_data("t1", "content")
    sealed = seal_text("I am pregnant.", key, associated=turn, nonce=bytes(12))
    clock.advance(60)
    assert keys.destroy("u1", "session", "s1") == (key.key_id,)
    document = db[DATA_KEYS].find_one({"_id": key.key_id})
    assert "material" not in document and document["destroyed_at"] == START + timedelta(seconds=60)
    for reader in (keys, store(db, clock)):  # this process and a fresh one
        with pytest.raises(KeyDestroyed):
            open_text(sealed, reader.key(sealed.key_id), associated=turn)


def test_destroying_again_destroys_nothing_and_reports_nothing(db: Db, clock: Clock) -> None:
    keys = store(db, clock)
    keys.current("session", "u1", "s1")
    assert len(keys.destroy("u1", "session", "s1")) == 1
    clock.advance(60)
    assert keys.destroy("u1", "session", "s1") == ()
    (record,) = keys.records("u1")
    assert record.destroyed_at == START  # the first destruction's time is kept


def test_a_session_used_again_after_its_key_was_destroyed_gets_a_new_generation(
    db: Db, clock: Clock
) -> None:
    keys = store(db, clock)
    first = keys.current("session", "u1", "s1")
    keys.destroy("u1", "session", "s1")
    second = keys.current("session", "u1", "s1")
    assert second.key_id != first.key_id and second.material != first.material
    assert store(db, clock).current("session", "u1", "s1") == second  # another process agrees
    assert [(r.generation, r.destroyed_at is None) for r in keys.records("u1")] == [
        (1, False),
        (2, True),
    ]
    assert keys.key(first.key_id) is None


def test_forgetting_a_user_destroys_every_key_of_theirs_and_no_one_elses(
    db: Db, clock: Clock
) -> None:
    keys = store(db, clock)
    theirs = {
        keys.current("session", "u1", "s1").key_id,
        keys.current("memory", "u1", "m1").key_id,
        keys.current("user", "u1").key_id,
    }
    other = keys.current("session", "u2", "s1")
    assert set(keys.destroy("u1")) == theirs
    assert all(keys.key(key_id) is None for key_id in theirs)
    assert keys.key(other.key_id) == other


def test_forgetting_a_memory_destroys_only_that_memorys_key(db: Db, clock: Clock) -> None:
    keys = store(db, clock)
    forgotten = keys.current("memory", "u1", "m1")
    kept = [keys.current("memory", "u1", "m2"), keys.current("session", "u1", "m1")]
    assert keys.destroy("u1", "memory", "m1") == (forgotten.key_id,)
    assert [keys.key(key.key_id) for key in kept] == kept


def test_a_late_request_spares_keys_created_after_it(db: Db, clock: Clock) -> None:
    keys = store(db, clock)
    before = keys.current("session", "u1", "s1")
    requested_at = clock()
    clock.advance(10)
    keys.destroy("u1", "session", "s1")
    after = keys.current("session", "u1", "s1")  # generation 2, created after the request
    clock.advance(10)
    assert keys.destroy("u1", "session", "s1", created_until=requested_at) == ()
    assert keys.key(after.key_id) == after and keys.key(before.key_id) is None


def test_a_subject_without_a_scope_is_refused(db: Db, clock: Clock) -> None:
    with pytest.raises(ValueError, match="within a scope"):
        store(db, clock).destroy("u1", subject="s1")


# ---- the cache ---------------------------------------------------------------------------------


def test_after_destroy_this_process_never_returns_the_cached_material(db: Db, clock: Clock) -> None:
    keys = store(db, clock, cache_ttl=timedelta(hours=1))
    key = keys.current("session", "u1", "s1")
    assert keys.key(key.key_id) == key  # cached
    keys.destroy("u1", "session", "s1")
    assert keys.key(key.key_id) is None
    assert keys.current("session", "u1", "s1").key_id != key.key_id


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
    assert len(keys._cached) == 2
    assert [keys.key(key.key_id) for key in made] == made


# ---- the key ring the stages use ---------------------------------------------------------------


def test_a_cold_ring_names_the_lookup_it_needs_and_then_answers_from_memory(
    db: Db, clock: Clock
) -> None:
    from handlers.sealed_events import KeyNotCached
    from projections.data_keys import StoreKeyRing

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
    from projections.data_keys import StoreKeyRing

    keys = store(db, clock)
    made = keys.current("session", "u1", "s1")
    store(db, clock).destroy("u1", "session", "s1")
    reader = StoreKeyRing(store(db, clock), blocking=True)
    assert reader.opening_key(made.key_id) is None
    db[DATA_KEYS].delete_many({})  # a second lookup would now raise UnknownKey
    assert reader.opening_key(made.key_id) is None
    assert reader.store.cached_key(made.key_id) == (True, None)


def test_a_forget_request_destroys_its_keys_once_and_counts_them_on_the_receipt(
    db: Db, clock: Clock
) -> None:
    from projections.key_erasure import destroy_forgotten_keys
    from projections.writes import LiveWrites
    from tests import factories as f

    keys = store(db, clock)
    keys.current("session", "u1", "s1")
    keys.current("session", "u1", "s2")
    request = f.session_forgotten(user_id="u1", session_id="s1", occurred_at=START)
    assert destroy_forgotten_keys(keys, LiveWrites(db), request) == 1
    assert destroy_forgotten_keys(keys, LiveWrites(db), request) == 0  # a redelivery
    receipt = db["erasures"].find_one({"_id": request.event_id})
    assert receipt["keys_destroyed"] == {"turns": 1}
    live = {(r.subject, r.destroyed_at is None) for r in keys.records("u1")}
    assert live == {("s1", False), ("s2", True)}


def test_a_receipt_started_by_destroyed_keys_names_its_request_and_is_not_complete(
    db: Db, clock: Clock
) -> None:
    """The keys die before the record's erasure is projected: a reader polling the receipt
    meanwhile sees whose request it is, and no step yet."""
    from handlers.erasure_receipts import with_progress
    from projections.key_erasure import destroy_forgotten_keys
    from projections.writes import LiveWrites
    from tests import factories as f

    keys = store(db, clock)
    keys.current("session", "u1", "s1")
    request = f.session_forgotten(user_id="u1", session_id="s1", occurred_at=START)
    destroy_forgotten_keys(keys, LiveWrites(db), request)
    shown = with_progress(db["erasures"].find_one({"_id": request.event_id}), partitions=1)
    assert (shown["kind"], shown["user_id"], shown["session_id"]) == ("session", "u1", "s1")
    assert shown["complete"] is False
    assert shown["seen_steps"] == {"turns": 0, "snapshots": 0, "memories": 0}


def test_the_store_creates_its_index_before_it_first_looks_a_subject_up(
    db: Db, clock: Clock
) -> None:
    DataKeyStore(db, clock=clock).current("session", "u1", "s1")  # no ensure_indexes call
    names = {index["name"] for index in db[DATA_KEYS].list_indexes()}
    assert "owner_scope_subject_generation" in names
