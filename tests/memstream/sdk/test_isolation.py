"""No read, search, reconciliation or replay ever returns or uses another user's data:
randomized users with near-identical memories."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from pymongo import MongoClient

from events import MemoryAdded, derived_id
from memstream.config import load_settings
from memstream.sdk.client import MemoryClient
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


def test_a_replay_keeps_every_users_data_their_own(
    store: tuple[Any, list[str]], mongo: Any
) -> None:
    from memstream.cli.replay import collection_events, differences, replay

    settings, users = store
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    source = client[settings.mongodb.database]
    rebuilt_name = f"iso_replay_{uuid.uuid4().hex[:10]}"
    try:
        report = replay(collection_events(source), client[rebuilt_name], show=False)
        assert report.collisions == []
        assert differences(source, client[rebuilt_name]) == []
        rebuilt = settings.model_copy(
            update={"mongodb": settings.mongodb.model_copy(update={"database": rebuilt_name})}
        )
        rng = random.Random(13)

        async def check() -> None:
            before = MemoryClient(settings, embedder=BagOfWords())
            after = MemoryClient(rebuilt, embedder=BagOfWords())
            try:
                for user in rng.sample(users, 20):
                    mine = {m["memory_id"]: m["text"] for m in await before.memories(user)}
                    assert {m["memory_id"]: m["text"] for m in await after.memories(user)} == mine
                    query = f"the user likes {rng.choice(WORDS)}"
                    found = await after.search(user, query, limit=10)
                    assert {m["user_id"] for m in found} <= {user}
                    assert {m["memory_id"] for m in found} <= set(mine)
            finally:
                await before.close()
                await after.close()

        asyncio.run(check())
    finally:
        client.drop_database(rebuilt_name)
        client.close()


def test_reconciliation_never_considers_another_users_memories(mongo: Any) -> None:
    """The extraction stages' candidate lookup (`StageReadModel.current_memories`, by user, on
    the read model) and `handlers.reconcile` itself, given every user's near-identical memories
    at once."""
    from projections.known_memories import StageReadModel

    rng = random.Random(17)
    embedder = BagOfWords()
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    db = client[f"iso_{uuid.uuid4().hex[:10]}"]
    ensure_indexes(db)
    read_model = StageReadModel(db, "memories")
    users = [f"user-{n}" for n in range(40)]
    try:
        _reconcile_every_user(db, read_model, rng, embedder, users)
    finally:
        client.drop_database(db.name)
        client.close()


def _reconcile_every_user(
    db: Any, read_model: Any, rng: random.Random, embedder: BagOfWords, users: list[str]
) -> None:
    from events.memories import Evidence
    from handlers.known_memory import KnownMemory
    from handlers.reconcile import NewMemory, Source, Thresholds, reconcile

    everyone: list[KnownMemory] = []
    owner: dict[str, str] = {}
    for user in users:
        agent = rng.choice([None, "agent-1"])
        for n in range(rng.randint(2, 6)):
            text = f"The user likes {rng.choice(WORDS[:3])}."  # the same few sentences for all
            memory_id = derived_id("iso", user, n)
            added = f.memory_added(
                memory_id=memory_id,
                user_id=user,
                agent_id=agent,
                content=f.content(text=text),
                embedding=tuple(embedder.embed([text])[0]),
                provenance=f.provenance(
                    embedding_model=embedder.model_name, embedding_dimensions=len(WORDS)
                ),
            )
            project(db, added)
            everyone.append(
                KnownMemory(
                    memory_id=memory_id,
                    version=1,
                    user_id=user,
                    agent_id=agent,
                    content=added.content,
                    embedding=added.embedding,
                    embedding_model=embedder.model_name,
                )
            )
            owner[memory_id] = user
    shown: list[tuple[str, list[str]]] = []

    for user in rng.sample(users, 20):
        for agent in (None, "agent-1"):
            source = Source(
                source_id=f"snap-{user}",
                user_id=user,
                agent_id=agent,
                evidence=Evidence(source="sdk", observed_at=f.at(0)),
                occurred_at=f.at(0),
            )

            async def ask(questions: Any, user: str = user) -> list[None]:
                for question in questions:
                    shown.append((user, [option.memory.memory_id for option in question.options]))
                return [None] * len(questions)

            first, second = rng.sample(WORDS[:3], 2)
            texts = [
                f"The user likes {first}.",
                f"Both {first} and {second} are what the user likes.",
            ]
            # a near-duplicate (REINFORCE by rule) and a similar one (shown to the LLM); the second
            # opens with none of the known sentences' words, or wording would decide it
            news = [NewMemory(f.content(text=t), tuple(embedder.embed([t])[0])) for t in texts]
            stored = read_model.current_memories(user, "semantic")
            assert {m.user_id for m in stored} == {user}
            for known in (stored, everyone):
                result = asyncio.run(
                    reconcile(
                        "semantic",
                        news,
                        known,
                        source=source,
                        provenance=f.provenance(embedding_model=embedder.model_name),
                        thresholds=Thresholds(reinforce=0.999, ask=0.5),
                        ask=ask,
                    )
                )
                for event in result.events:
                    assert event.user_id == user
                    assert owner.get(event.memory_id, user) == user
                assert {m.memory_id for m in result.known} <= {
                    m for m, u in owner.items() if u == user
                } | {e.memory_id for e in result.events}
    assert shown, "some decisions went to the LLM"
    for user, options in shown:
        # (an option not in `owner` is a memory this same reconciliation just added)
        assert {owner.get(memory_id, user) for memory_id in options} == {user}
