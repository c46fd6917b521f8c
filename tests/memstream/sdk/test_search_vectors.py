"""`ReadModel.search` on a database holding both stored forms of a vector: memories projected
before vectors were packed (lists of doubles) and after (BSON float32 vectors) rank together,
with the scores each would have alone."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from bson.binary import Binary
from pymongo import MongoClient
from pymongo.database import Database

from memstream.sdk.read_model import ReadModel
from projections import ensure_indexes
from projections.memories import project_memory_event
from projections.writes import LiveWrites
from tests import factories

pytestmark = pytest.mark.integration
NOW = datetime(2026, 12, 1, tzinfo=UTC)
MODEL = "scripted-embedding"
Db = Database[dict[str, Any]]


@pytest.fixture
def database(mongo: Any) -> Iterator[tuple[str, Db]]:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    db = client[f"vectors_{uuid.uuid4().hex[:10]}"]
    ensure_indexes(db)
    yield mongo.uri, db
    client.drop_database(db.name)
    client.close()


def old_memory(db: Db, memory_id: str, text: str, vector: list[float]) -> None:
    """A current memory as the projector stored it before vectors were packed."""
    db["memories"].insert_one(
        {
            "_id": f"{memory_id}:v1",
            "memory_id": memory_id,
            "version": 1,
            "status": "current",
            "memory_type": "semantic",
            "user_id": factories.USER_ID,
            "subject": "the user",
            "owner": "user",
            "text": text,
            "embedding": vector,
            "embedding_model": MODEL,
            "created_at": NOW,
            "updated_at": NOW,
        }
    )


def new_memory(db: Db, memory_id: str, text: str, vector: list[float]) -> None:
    """A memory added through the projector (its vector packed), counted in `memory_writes`."""
    event = factories.memory_added(
        memory_id=memory_id,
        content=factories.content(text=text),
        embedding=tuple(vector),
        provenance=factories.provenance(embedding_model=MODEL, embedding_dimensions=3),
    )
    project_memory_event(LiveWrites(db), event)


def searched(uri: str, db: Db, *queries: tuple[str, list[float]]) -> list[list[tuple[Any, ...]]]:
    async def run() -> list[list[tuple[Any, ...]]]:
        read_model = ReadModel(uri, db.name)
        try:
            found = []
            for text, vector in queries:
                hits = await read_model.search(factories.USER_ID, text, vector, MODEL)
                found.append([(h["memory_id"], h["vector_score"]) for h in hits])
            return found
        finally:
            await read_model.close()

    return asyncio.run(run())


def cosine(a: list[float], b: list[float]) -> float:
    left, right = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    return float(left @ right / (np.linalg.norm(left) * np.linalg.norm(right)))


def test_memories_stored_as_doubles_and_packed_rank_together_by_their_cosine(
    database: tuple[str, Db],
) -> None:
    uri, db = database
    vectors = {
        "tea": [1.0, 0.0, 0.0],
        "jazz": [0.6, 0.8, 0.0],
        "porto": [0.0, 0.6, 0.8],
        "cats": [0.8, 0.0, 0.6],
    }
    old_memory(db, "tea", "The user drinks tea.", vectors["tea"])
    old_memory(db, "jazz", "The user likes jazz.", vectors["jazz"])
    new_memory(db, "porto", "The user lives in Porto.", vectors["porto"])
    new_memory(db, "cats", "The user has two cats.", vectors["cats"])
    forms = {m["memory_id"]: type(m["embedding"]) for m in db["memories"].find()}
    assert forms == {"tea": list, "jazz": list, "porto": Binary, "cats": Binary}
    query = [0.9, 0.1, 0.35]
    (hits,) = searched(uri, db, ("unrelated words", query))
    assert [memory_id for memory_id, _ in hits] == ["cats", "tea", "jazz", "porto"]
    for memory_id, score in hits:
        assert score == pytest.approx(cosine(vectors[memory_id], query), abs=1e-6)


def test_an_index_built_from_doubles_is_updated_with_a_packed_memory(
    database: tuple[str, Db],
) -> None:
    uri, db = database
    new_memory(db, "porto", "The user lives in Porto.", [0.0, 0.6, 0.8])
    old_memory(db, "tea", "The user drinks tea.", [1.0, 0.0, 0.0])

    async def before_and_after_a_write() -> list[list[str]]:
        read_model = ReadModel(uri, db.name)
        try:
            found = []
            for step in range(2):
                if step == 1:
                    new_memory(db, "cats", "The user has two cats.", [0.8, 0.0, 0.6])
                hits = await read_model.search(factories.USER_ID, "x", [0.9, 0.1, 0.3], MODEL)
                found.append([h["memory_id"] for h in hits])
            return found
        finally:
            await read_model.close()

    assert asyncio.run(before_and_after_a_write()) == [["tea", "porto"], ["cats", "tea", "porto"]]
