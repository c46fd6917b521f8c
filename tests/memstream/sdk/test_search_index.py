"""`UserIndex.updated`: an index updated with changed memories ranks exactly as one rebuilt from
the same memories (ids and all three scores, every mode, with filters, the local model's
language correction included); vectors stored packed or as lists of doubles (an older database)
index alike; the language correction ranks, `vector_score` stays the cosine."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from handlers.cross_lingual import LOCAL_MODEL, language_of, same_language_bias
from handlers.search import Filters, SearchMode
from memstream.sdk.search_index import UserIndex
from projections.vectors import pack_vector, unpack_vector

CREATED = datetime(2026, 11, 30, tzinfo=UTC)
WORDS = ["the", "user", "tea", "coffee", "works", "at", "stripe", "lives", "porto", "john"]
MODES: tuple[SearchMode, ...] = ("vector", "keyword", "hybrid")
FILTERS = [
    Filters(),
    Filters(types=["semantic", "episodic"]),
    Filters(subject="JOHN", agent_id="bot"),
    Filters(owner="user", category="food", since=CREATED + timedelta(minutes=3)),
    Filters(until=CREATED + timedelta(minutes=4)),
]


def memory(rng: random.Random, memory_id: str) -> dict[str, Any]:
    """A current memory with random fields; embedded by model a (6-d), b (4-d) or not at all,
    its vector stored packed or as a list of doubles (an older database)."""
    if rng.random() < 0.6:
        text = " ".join(rng.choices(WORDS, k=rng.randint(2, 8)))
    else:
        text = "".join(rng.choices("用户喜欢喝绿茶咖啡住在里斯本", k=rng.randint(2, 10)))
    model, dimension = rng.choice([("a", 6), (LOCAL_MODEL, 6), ("b", 4), ("", 0)])
    vector = [round(rng.gauss(0, 1), 2) for _ in range(dimension)]
    return {
        "memory_id": memory_id,
        "version": rng.randint(1, 3),
        "memory_type": rng.choice(["semantic", "episodic", "procedural", "taxonomic"]),
        "user_id": "u",
        "agent_id": rng.choice([None, "bot"]),
        "subject": rng.choice(["the user", "John", "anna"]),
        "owner": rng.choice(["user", "agent"]),
        "category": rng.choice([None, "food", f"c{rng.randrange(20)}"]),
        "text": text,
        "created_at": CREATED + timedelta(minutes=rng.randint(0, 9)),
        "embedding": pack_vector(vector) if rng.random() < 0.5 else vector,
        "embedding_model": model,
    }


def rankings(index: UserIndex, rng: random.Random) -> list[list[tuple[Any, ...]]]:
    found = []
    for _ in range(15):
        query = rng.choice(["the user", "tea at stripe", "用户喝咖啡", "john porto", "x", ""])
        model, dimension = rng.choice(
            [("a", 6), (LOCAL_MODEL, 6), ("b", 4), ("a", 4), ("missing", 6)]
        )
        vector = [rng.gauss(0, 1) for _ in range(dimension)]
        for mode in MODES:
            hits = index.search(
                query,
                vector,
                model,
                mode=mode,
                limit=rng.choice([1, 5, 10, 400]),
                filters=rng.choice(FILTERS),
            )
            found.append(
                [
                    (
                        index.documents[h.position]["memory_id"],
                        index.documents[h.position]["text"],
                        h.score,
                        h.vector_score,
                        h.keyword_score,
                    )
                    for h in hits
                ]
            )
    return found


@pytest.mark.parametrize("seed", range(12))
def test_an_updated_index_ranks_exactly_as_one_rebuilt_from_the_same_memories(seed: int) -> None:
    rng = random.Random(seed)
    current = {f"m{i:03d}": memory(rng, f"m{i:03d}") for i in range(rng.choice([0, 3, 40, 200]))}
    index = UserIndex.built(0, list(current.values()))
    for revision in range(1, 6):
        changed = set(rng.sample(sorted(current), k=min(len(current), rng.randint(0, 15))))
        changed |= {f"n{revision}-{i}" for i in range(rng.randint(0, 10))}  # new memories
        for memory_id in sorted(changed):
            if memory_id in current and rng.random() < 0.4:
                del current[memory_id]  # superseded without a successor, or gone
            else:
                current[memory_id] = memory(rng, memory_id)  # added, or a new version
        documents = [current[i] for i in sorted(changed) if i in current]
        index = index.updated(revision, changed, documents)
        shuffled = list(current.values())
        rng.shuffle(shuffled)  # the database's order is not the index's
        rebuilt = UserIndex.built(revision, shuffled)
        assert sorted(d["memory_id"] for d in index.documents) == sorted(current)
        assert all("embedding" not in d for d in index.documents)
        queries = random.Random(seed * 100 + revision)
        assert rankings(index, queries) == rankings(rebuilt, random.Random(seed * 100 + revision))


def test_updating_with_nothing_changed_keeps_every_ranking() -> None:
    rng = random.Random(5)
    index = UserIndex.built(1, [memory(rng, f"m{i}") for i in range(50)])
    again = index.updated(2, set(), [])
    assert rankings(again, random.Random(1)) == rankings(index, random.Random(1))
    assert again.revision == 2


def test_an_index_of_packed_vectors_ranks_exactly_as_one_of_the_same_vectors_as_lists() -> None:
    rng = random.Random(9)
    documents = [memory(rng, f"m{i:03d}") for i in range(120)]
    as_lists = [dict(d, embedding=list(unpack_vector(d["embedding"]))) for d in documents]
    packed = [dict(d, embedding=pack_vector(d["embedding"])) for d in as_lists]
    expected = rankings(UserIndex.built(1, as_lists), random.Random(2))
    assert rankings(UserIndex.built(1, packed), random.Random(2)) == expected
    assert rankings(UserIndex.built(1, documents), random.Random(2)) == expected


def _bilingual(texts_and_cosines: list[tuple[str, float]], model: str = LOCAL_MODEL) -> UserIndex:
    """Memories whose 2-d vectors have the given cosines to the query `_unit(0)`."""
    return UserIndex.built(
        1,
        [
            {
                "memory_id": f"m{i}",
                "memory_type": "semantic",
                "subject": "the user",
                "owner": "user",
                "text": text,
                "created_at": CREATED,
                "embedding": pack_vector(_unit(float(np.arccos(cosine)))),
                "embedding_model": model,
            }
            for i, (text, cosine) in enumerate(texts_and_cosines)
        ],
    )


def _unit(angle: float) -> list[float]:
    return [float(np.cos(angle)), float(np.sin(angle))]


ALLERGIES = [
    ("李娜对贝类过敏。", 0.86),
    ("悦悦对芒果过敏。", 0.85),
    ("The user is allergic to shrimp.", 0.84),
]


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_a_chinese_query_finds_its_english_answer_above_closer_chinese_memories(
    mode: SearchMode,
) -> None:
    index = _bilingual(ALLERGIES)
    hits = index.search(
        "我对什么过敏", _unit(0.0), LOCAL_MODEL, mode=mode, limit=3, filters=Filters()
    )
    assert index.documents[hits[0].position]["memory_id"] == "m2"
    cosines = {index.documents[h.position]["memory_id"]: h.vector_score for h in hits}
    assert cosines == pytest.approx({"m0": 0.86, "m1": 0.85, "m2": 0.84}, abs=1e-6)
    if mode == "vector":
        scores = {index.documents[h.position]["memory_id"]: h.score for h in hits}
        assert scores["m0"] == cosines["m0"] - same_language_bias(LOCAL_MODEL, "zh")  # type: ignore[operator]
        assert scores["m2"] == cosines["m2"]


def test_another_model_and_a_store_in_one_language_rank_by_the_plain_cosine() -> None:
    for index, model in [
        (_bilingual(ALLERGIES, model="text-embedding-3-small"), "text-embedding-3-small"),
        (_bilingual([t for t in ALLERGIES if language_of(t[0]) == "zh"]), LOCAL_MODEL),
    ]:
        hits = index.search(
            "我对什么过敏", _unit(0.0), model, mode="vector", limit=3, filters=Filters()
        )
        assert [h.position for h in hits] == list(range(len(index.documents)))
        assert [h.score for h in hits] == [h.vector_score for h in hits]
