"""No read ever returns another user's data: randomized users with near-identical memories."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from pymongo import MongoClient

from events import MemoryAdded, derived_id
from memstream.client import MemoryClient
from memstream.config import load_settings
from projections import ensure_indexes, project
from tests import factories as f

pytestmark = pytest.mark.integration
WORDS = [
    "tea",
    "coffee",
    "Lisbon",
    "Porto",
    "Stripe",
    "cello",
    "tennis",
    "vegan",
    "Berlin",
    "nurse",
]


class BagOfWords:
    """A deterministic embedder: one dimension per word of `WORDS`."""

    model_name = "bag-of-words"
    dimension = len(WORDS)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(word.lower() in text.lower()) + 0.01 for word in WORDS] for text in texts]


@pytest.fixture
def store(mongo: Any) -> Iterator[tuple[Any, list[str]]]:
    """60 users, each with memories drawn from the same few sentences."""
    database = f"iso_{uuid.uuid4().hex[:10]}"
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    db = client[database]
    ensure_indexes(db)
    rng = random.Random(7)
    users = [f"user-{n}" for n in range(60)]
    embedder = BagOfWords()
    for user in users:
        for n in range(rng.randint(3, 8)):
            text = f"The user likes {rng.choice(WORDS)} and {rng.choice(WORDS)}."
            memory_id = derived_id("iso", user, n)
            project(
                db,
                MemoryAdded(
                    event_id=derived_id("added", memory_id),
                    occurred_at=f.at(n),
                    memory_id=memory_id,
                    memory_type="semantic",
                    user_id=user,
                    content=f.content(text=text),
                    embedding=tuple(embedder.embed([text])[0]),
                    evidence=f.evidence(),
                    provenance=f.provenance(
                        embedding_model="bag-of-words", embedding_dimensions=len(WORDS)
                    ),
                ),
            )
    settings = load_settings(
        environ={
            "MEMSTREAM_CONFIG": "/dev/null",
            "MONGODB_URI": mongo.uri,
            "MONGODB_DATABASE": database,
        }
    )
    yield settings, users
    client.drop_database(database)
    client.close()


def test_no_read_returns_another_users_memories(store: tuple[Any, list[str]]) -> None:
    settings, users = store
    rng = random.Random(11)

    async def check() -> None:
        client = MemoryClient(settings, embedder=BagOfWords())
        try:
            for user in rng.sample(users, 25):
                query = f"does the user like {rng.choice(WORDS)}?"
                for mode in ("hybrid", "vector", "keyword"):
                    found = await client.search(user, query, limit=10, mode=mode)  # type: ignore[arg-type]
                    assert {m["user_id"] for m in found} <= {user}
                mine = await client.memories(user, history=True)
                assert mine and {m["user_id"] for m in mine} == {user}
                then = await client.memories(user, as_of=f.at(2))
                assert {m["user_id"] for m in then} <= {user}
                other = rng.choice([u for u in users if u != user])
                theirs = (await client.memories(other))[0]["memory_id"]
                assert await client.history(user, theirs) == []
                assert await client.profile(user) is None
        finally:
            await client.close()

    asyncio.run(check())
