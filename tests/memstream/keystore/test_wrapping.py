"""Data keys wrapped by a master key: the database holds nothing that opens content without it;
master keys rotate without re-sealing anything; keys stored unwrapped stay readable and get
wrapped."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from handlers.sealing import associated_data, open_text, seal_text
from memstream.keystore.mongo import DATA_KEYS, MongoDataKeys
from memstream.keystore.wrapping import (
    KekUnavailable,
    LocalMasterKeys,
    kek_id,
    new_master_key,
    read_master_keys,
    write_master_keys,
)
from tests.memstream.keystore.test_mongo import Clock

pytestmark = pytest.mark.integration

NONCE = b"\x07" * 12
OLD, NEW = b"\x01" * 32, b"\x02" * 32


def store(db: Any, *master_keys: bytes) -> MongoDataKeys:
    """A key store as one process holds it, with these master keys (none: unwrapped)."""
    wrapper = LocalMasterKeys(master_keys) if master_keys else None
    return MongoDataKeys(db, clock=Clock(), wrapper=wrapper)


def sealed_turn(keys: MongoDataKeys) -> tuple[str, bytes]:
    key = keys.current("session", "ann", "s1")
    where = associated_data("turn-1", "content")
    sealed = seal_text("I live in Lisbon.", key, associated=where, nonce=NONCE)
    return key.key_id, sealed.model_dump_json().encode()


def opened(keys: MongoDataKeys, key_id: str, record: bytes) -> str:
    from events.sealed import Sealed

    sealed = Sealed.model_validate_json(record)
    return open_text(sealed, keys.key(key_id), associated=associated_data("turn-1", "content"))


def test_a_wrapped_key_is_stored_without_its_material(db: Any) -> None:
    keys = store(db, NEW)
    key = keys.current("session", "ann", "s1")
    (document,) = db[DATA_KEYS].find()
    assert "material" not in document and document["kek"] == kek_id(NEW)
    assert key.material not in bytes(document["wrapped"])
    assert store(db, NEW).key(key.key_id) == key  # another process, the same master key


def test_a_dump_of_the_keys_without_the_master_key_opens_nothing(db: Any, mongo: Any) -> None:
    key_id, record = sealed_turn(store(db, NEW))
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    dump = client[f"dump_{uuid.uuid4().hex[:10]}"]
    try:
        dump[DATA_KEYS].insert_many(list(db[DATA_KEYS].find()))  # what a thief copies
        with pytest.raises(KekUnavailable, match="MEMSTREAM_MASTER_KEY_FILE"):
            opened(store(dump), key_id, record)
        with pytest.raises(KekUnavailable, match="does not hold"):
            opened(store(dump, new_master_key()), key_id, record)
        assert opened(store(dump, NEW), key_id, record) == "I live in Lisbon."
    finally:
        client.drop_database(dump.name)
        client.close()


def test_a_wrapped_key_moved_to_another_document_does_not_open(db: Any) -> None:
    keys = store(db, NEW)
    first = keys.current("session", "ann", "s1")
    second = keys.current("session", "ann", "s2")
    wrapped = db[DATA_KEYS].find_one({"_id": first.key_id})["wrapped"]
    db[DATA_KEYS].update_one({"_id": second.key_id}, {"$set": {"wrapped": wrapped}})
    with pytest.raises(KekUnavailable, match="does not open"):
        store(db, NEW).key(second.key_id)


def test_rotation_rewraps_every_key_and_the_sealed_content_still_opens(db: Any) -> None:
    key_id, record = sealed_turn(store(db, OLD))
    store(db, OLD).current("memory", "ann", "m1")
    rotated = store(db, NEW, OLD)  # the new key first, the old one kept to unwrap
    done = rotated.rewrap()
    assert done.moved == {kek_id(OLD): 2} and done.skipped == 0
    assert {d["kek"] for d in db[DATA_KEYS].find()} == {kek_id(NEW)}
    assert opened(store(db, NEW), key_id, record) == "I live in Lisbon."  # old key retired
    with pytest.raises(KekUnavailable):
        store(db, OLD).key(key_id)
    assert rotated.rewrap().moved == {}


def test_keys_stored_unwrapped_stay_readable_and_rewrap_wraps_them(db: Any) -> None:
    key_id, record = sealed_turn(store(db))
    assert "material" in db[DATA_KEYS].find_one({"_id": key_id})
    wrapping = store(db, NEW)
    assert opened(wrapping, key_id, record) == "I live in Lisbon."
    assert wrapping.counts_by_master_key() == {"plain": 1}
    assert wrapping.rewrap().moved == {"plain": 1}
    document = db[DATA_KEYS].find_one({"_id": key_id})
    assert "material" not in document and document["kek"] == kek_id(NEW)
    assert wrapping.counts_by_master_key() == {kek_id(NEW): 1}


def test_a_destroyed_key_loses_its_wrapped_material_and_rewrap_leaves_it_destroyed(
    db: Any,
) -> None:
    old = store(db, OLD)
    key_id, _ = sealed_turn(old)
    old.destroy("ann")
    document = db[DATA_KEYS].find_one({"_id": key_id})
    assert "wrapped" not in document and "material" not in document
    assert document["destroyed_at"] is not None
    assert store(db, NEW, OLD).rewrap().moved == {}
    assert store(db, NEW, OLD).key(key_id) is None


def test_a_master_key_file_round_trips_and_bad_files_are_named(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    write_master_keys(path, [NEW, OLD])
    assert path.stat().st_mode & 0o777 == 0o600
    keys = read_master_keys(path)
    assert keys.keys == (NEW, OLD) and keys.current == kek_id(NEW)
    path.write_text("not base64!\n")
    with pytest.raises(ValueError, match=r"master\.key, line 1"):
        read_master_keys(path)
    path.write_text("AAAA\n")
    with pytest.raises(ValueError, match="32 bytes"):
        read_master_keys(path)
    with pytest.raises(ValueError, match=r"missing\.key"):
        read_master_keys(tmp_path / "missing.key")
