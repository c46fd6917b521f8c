"""The query and update subset evaluated in memory (`projections.documents`): its rules, and the
same answers as the server for random documents, conditions and changes."""

from __future__ import annotations

import copy
import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.database import Database

from projections.documents import Unsupported, apply_change, matches, reached

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
Db = Database[dict[str, Any]]


def test_a_path_reaches_through_an_array_of_documents() -> None:
    document = {"evidence": [{"event_id": "e1"}, {"other": 1}, {"event_id": "e2"}], "n": 3}
    assert reached(document, "evidence.event_id") == ["e1", "e2"]
    assert reached(document, "n.x") == []
    assert matches(document, {"evidence.event_id": "e2"})
    assert not matches(document, {"evidence.event_id": {"$ne": "e1"}})
    assert matches(document, {"evidence.event_id": {"$ne": "e3"}})


def test_none_matches_a_missing_field_and_ne_none_needs_a_value() -> None:
    assert matches({"a": 1}, {"b": None})
    assert matches({"b": None}, {"b": None})
    assert not matches({"b": None}, {"b": {"$exists": True, "$ne": None}})
    assert matches({"b": "x"}, {"b": {"$exists": True, "$ne": None}})


def test_an_array_condition_matches_the_same_array_or_an_array_holding_it() -> None:
    assert matches({"turn_ids": ["t1", "t2"]}, {"turn_ids": ["t1", "t2"]})
    assert not matches({"turn_ids": ["t2", "t1"]}, {"turn_ids": ["t1", "t2"]})
    assert matches({"turn_ids": ["t1", "t2"]}, {"turn_ids": "t2"})
    either = {"$or": [{"turn_ids": {"$exists": False}}, {"turn_ids": ["t1"]}]}
    assert matches({}, either) and matches({"turn_ids": ["t1"]}, either)
    assert not matches({"turn_ids": ["t9"]}, either)


def test_lt_compares_times_at_the_millisecond_and_only_values_of_one_kind() -> None:
    at = T0 + timedelta(microseconds=400)
    assert not matches({"at": T0}, {"at": {"$lt": at}})  # the same millisecond on the server
    assert matches({"at": T0}, {"at": {"$lt": T0 + timedelta(milliseconds=1)}})
    assert not matches({"at": "2026"}, {"at": {"$lt": T0}})
    assert not matches({}, {"at": {"$lt": T0}})


def test_documents_compare_field_by_field_in_order() -> None:
    assert matches({"d": {"a": 1, "b": 2}}, {"d": {"a": 1, "b": 2}})
    assert not matches({"d": {"b": 2, "a": 1}}, {"d": {"a": 1, "b": 2}})


def test_changes_create_paths_and_never_modify_what_the_caller_holds() -> None:
    attributes = {"since": 2020}
    document: dict[str, Any] = {"_id": "m", "attributes": attributes, "evidence": []}
    apply_change(
        document,
        {
            "$set": {"attributes.city": "Porto", "fields.name.value": "Tim"},
            "$push": {"evidence": {"event_id": "e1"}},
            "$inc": {"count": 2},
            "$max": {"updated_at": T0},
            "$setOnInsert": {"created": True},
        },
        inserting=False,
    )
    assert attributes == {"since": 2020}
    assert document == {
        "_id": "m",
        "attributes": {"since": 2020, "city": "Porto"},
        "evidence": [{"event_id": "e1"}],
        "fields": {"name": {"value": "Tim"}},
        "count": 2,
        "updated_at": T0,
    }


def test_push_each_keeps_the_slice_and_add_to_set_adds_only_new_values() -> None:
    document: dict[str, Any] = {"changed": ["a", "b"], "redrives": [{"id": 1}]}
    apply_change(
        document,
        {
            "$push": {"changed": {"$each": ["c", "d"], "$slice": -3}},
            "$addToSet": {"redrives": {"id": 1}},
        },
        inserting=False,
    )
    apply_change(document, {"$addToSet": {"redrives": {"id": 2}}}, inserting=False)
    assert document == {"changed": ["b", "c", "d"], "redrives": [{"id": 1}, {"id": 2}]}


def test_max_replaces_a_missing_or_null_value_and_keeps_a_larger_one() -> None:
    document: dict[str, Any] = {"a": None, "b": 5}
    apply_change(document, {"$max": {"a": 1, "b": 3, "c": 2}}, inserting=False)
    assert document == {"a": 1, "b": 5, "c": 2}


@pytest.mark.parametrize(
    ("condition", "change"),
    [
        ({"a": {"$gt": 1}}, {}),
        ({"$nor": [{"a": 1}]}, {}),
        ({}, {"$pull": {"a": 1}}),
        ({}, {"$set": {"n.x": 1}}),  # a field inside a number
        ({}, {"$push": {"list": {"$each": [1], "$sort": 1}}}),
        ({"list.0": 1}, {}),
    ],
)
def test_what_is_not_evaluated_like_the_server_is_refused(
    condition: dict[str, Any], change: dict[str, Any]
) -> None:
    with pytest.raises(Unsupported):
        matches({"a": 1, "n": 3, "list": [1]}, condition)
        apply_change({"a": [1], "n": 3, "list": [1]}, change, inserting=False)


# -- against the server ------------------------------------------------------------------------


@pytest.fixture
def server_db(mongo: Any) -> Iterator[Db]:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    database = client[f"documents_{uuid.uuid4().hex[:10]}"]
    yield database
    client.drop_database(database.name)
    client.close()


def _value(rng: random.Random) -> Any:
    return rng.choice(
        (
            None,
            1,
            2,
            "x",
            "y",
            T0,
            T0 + timedelta(microseconds=300),
            T0 + timedelta(milliseconds=2),
            ["x", "y"],
            {"at": T0, "v": "x"},
        )
    )


def _document(rng: random.Random, index: int) -> dict[str, Any]:
    document: dict[str, Any] = {"_id": index}
    for name in rng.sample(("a", "b", "c"), rng.randrange(4)):
        document[name] = _value(rng)
    if rng.random() < 0.5:
        document["list"] = [{"e": _value(rng)} for _ in range(rng.randrange(3))]
    if rng.random() < 0.5:
        document["sub"] = {"at": _value(rng), "v": _value(rng)}
    return document


def _condition(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    path = rng.choice(("a", "b", "c", "list.e", "sub.at", "sub.v", "sub"))
    value = _value(rng)
    kind = rng.randrange(7 if depth == 0 else 6)
    if kind == 0:
        return {path: value}
    if kind == 1:
        return {path: {"$ne": value}}
    if kind == 2:
        return {path: {"$exists": rng.random() < 0.5}}
    if kind == 3:
        return {path: {"$lt": rng.choice((2, "y", T0 + timedelta(milliseconds=1)))}}
    if kind == 4:
        return {path: {"$in": [value, _value(rng)]}}
    if kind == 5:
        return {path: {"$exists": True, "$ne": None}}
    return {"$or": [_condition(rng, 1), _condition(rng, 1)]}


def _change(rng: random.Random) -> dict[str, Any]:
    kind = rng.randrange(6)
    path = rng.choice(("a", "new", "sub.v", "sub.new", "deep.er.path"))
    if kind == 0:
        return {"$set": {path: _value(rng)}, "$setOnInsert": {"made": True}}
    if kind == 1:
        return {"$inc": {"count": rng.randrange(1, 3)}}
    if kind == 2:
        return {"$max": {"stamp": rng.choice((T0, T0 + timedelta(milliseconds=5)))}}
    if kind == 3:
        return {"$push": {"pushed": {"$each": [rng.randrange(5), "z"], "$slice": -3}}}
    if kind == 4:
        return {"$addToSet": {"set": rng.choice(({"k": 1}, {"k": 2}, "s"))}}
    return {"$unset": {path: ""}}


@pytest.mark.integration
def test_random_conditions_match_the_documents_the_server_finds(server_db: Db) -> None:
    rng = random.Random(11)
    documents = [_document(rng, index) for index in range(60)]
    server_db["docs"].insert_many(copy.deepcopy(documents))
    stored = {d["_id"]: d for d in server_db["docs"].find()}  # as the server holds them
    evaluated = 0
    for _ in range(200):
        condition = _condition(rng)
        try:
            mine = {i for i, d in stored.items() if matches(d, condition)}
        except Unsupported:
            continue  # refused: the batch projects record by record then
        found = {d["_id"] for d in server_db["docs"].find(condition, {"_id": 1})}
        assert mine == found, condition
        evaluated += 1
    assert evaluated > 150


@pytest.mark.integration
def test_random_changes_leave_documents_as_the_server_does(server_db: Db) -> None:
    rng = random.Random(12)
    documents = {index: _document(rng, index) for index in range(40)}
    for document in documents.values():
        server_db["docs"].insert_one(copy.deepcopy(document))
    for index in range(40, 50):  # created by the change (an upsert)
        documents[index] = {"_id": index}
    for _ in range(200):
        index, change = rng.randrange(50), _change(rng)
        inserting = index >= 40 and server_db["docs"].count_documents({"_id": index}) == 0
        server_db["docs"].update_one({"_id": index}, change, upsert=True)
        try:
            apply_change(documents[index], change, inserting=inserting)
        except Unsupported:
            documents[index] = server_db["docs"].find_one({"_id": index})  # type: ignore[assignment]
    stored = {d["_id"]: d for d in server_db["docs"].find()}
    for index, document in documents.items():
        written = copy.deepcopy(document)
        server_db["memory"].replace_one({"_id": index}, written, upsert=True)
    held = {d["_id"]: d for d in server_db["memory"].find()}  # the same values, as stored
    assert held == stored
