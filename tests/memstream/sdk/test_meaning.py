"""Past messages reranked by the query embedder's similarities, and its bounded vector cache."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from handlers.recall import PastMessage, recalled
from memstream.sdk.meaning import (
    VectorCache,
    cache_key,
    embedded,
    recalled_by_meaning,
    similarity,
)


class CountingEmbedder:
    """A vector with a 1 for each of "apple", "banana", "cherry" the text holds (normalised);
    counts the texts embedded."""

    model_name = "axes"
    dimension = 3

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        vectors = [
            [float(fruit in text) for fruit in ("apple", "banana", "cherry")] for text in texts
        ]
        return [[x / max(1.0, sum(v) ** 0.5) for x in v] for v in vectors]


def test_only_texts_not_cached_are_embedded_each_distinct_text_once() -> None:
    embedder, cache = CountingEmbedder(), VectorCache()
    first = embedded(embedder, cache, ["apple", "banana", "apple"])
    assert embedder.embedded == ["apple", "banana"]
    assert [v.tolist() for v in first] == [[1, 0, 0], [0, 1, 0], [1, 0, 0]]
    embedded(embedder, cache, ["banana", "cherry"])
    assert embedder.embedded == ["apple", "banana", "cherry"]


def test_the_cache_drops_the_least_recently_used_vector_beyond_its_capacity() -> None:
    cache = VectorCache(capacity=2)
    vector = np.zeros(3, dtype=np.float32)
    cache.put(b"a", vector)
    cache.put(b"b", vector)
    assert cache.get(b"a") is not None  # "a" is now the most recent
    cache.put(b"c", vector)
    assert len(cache) == 2 and cache.get(b"b") is None and cache.get(b"a") is not None


def test_a_cache_key_is_a_digest_of_model_and_text_not_the_text() -> None:
    key = cache_key("axes", "my secret")
    assert b"secret" not in key and len(key) == 16
    assert key != cache_key("other-model", "my secret")


def test_an_empty_cache_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one vector"):
        VectorCache(capacity=0)


def test_an_embedder_giving_the_wrong_number_of_vectors_is_an_error() -> None:
    class Short(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return super().embed(texts)[:-1]

    with pytest.raises(ValueError, match="1 vectors for 2 texts"):
        embedded(Short(), VectorCache(), ["apple", "banana"])


def test_similarity_is_each_texts_cosine_to_the_query() -> None:
    embedder = CountingEmbedder()
    assert similarity(embedder, VectorCache(), "about apples", ["apple", "cherry"]) == [1.0, 0.0]
    assert similarity(embedder, VectorCache(), "a", []) == []


def test_recalled_by_meaning_reranks_the_keyword_matches_by_their_embedding() -> None:
    messages = [
        PastMessage("Kai", "Swimming in the lake, a cherry at the lake."),
        PastMessage("Kai", "An apple by the lake."),
        PastMessage("Kai", "Nothing in common."),
        PastMessage("Kai", "Apple pie."),
    ]
    question = "Did I eat an apple while swimming at the lake?"
    assert recalled(question, messages, 2) == [messages[0], messages[1]]  # keywords alone
    embedder, cache = CountingEmbedder(), VectorCache()
    assert recalled_by_meaning(embedder, cache, question, messages, 1) == [messages[1]]
    assert not any("Nothing" in text for text in embedder.embedded)  # no keyword match
    assert recalled_by_meaning(embedder, cache, question, messages, 0) == []
