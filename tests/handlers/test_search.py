"""Search ranking: keyword scores (English and Chinese) and reciprocal rank fusion."""

from __future__ import annotations

import pytest

from handlers.search import combine, fused, keyword_scores, ranking, tokens


def test_tokens_are_lowercased_words_and_chinese_characters_with_bigrams() -> None:
    assert tokens("The user works at Stripe.") == ["the", "user", "works", "at", "stripe"]
    assert tokens("用户喜欢咖啡") == [
        "用",
        "户",
        "喜",
        "欢",
        "咖",
        "啡",
        "用户",
        "户喜",
        "喜欢",
        "欢咖",
        "咖啡",
    ]
    assert tokens("我在 Stripe 工作") == ["我", "在", "我在", "stripe", "工", "作", "工作"]


def test_keyword_scores_favour_rare_shared_words() -> None:
    texts = ["The user works at Stripe.", "The user likes coffee.", "The user lives in Porto."]
    scores = keyword_scores("Where does the user work? Stripe?", texts)
    assert scores[0] > scores[1] and scores[0] > scores[2]
    assert keyword_scores("coffee", texts)[1] > 0 == keyword_scores("coffee", texts)[0]


def test_a_chinese_query_matches_without_a_segmenter() -> None:
    texts = ["用户喜欢喝咖啡。", "用户住在里斯本。"]
    scores = keyword_scores("咖啡", texts)
    assert scores[0] > 0 and scores[1] == 0


def test_no_query_words_score_nothing() -> None:
    assert keyword_scores("", ["a b"]) == [0.0]
    assert keyword_scores("x", []) == []


def test_fusion_rewards_agreement_between_rankings() -> None:
    scores = fused([["a", "b", "c"], ["b", "c", "a"]])
    assert ranking(scores)[0] == "b"
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("vector", ["a", "b"]), ("keyword", ["c"]), ("hybrid", ["c", "a"])],
)
def test_combine_by_mode(mode: str, expected: list[str]) -> None:
    vector = {"a": 0.9, "b": 0.8, "c": 0.7}
    keyword = {"a": 0.0, "b": 0.0, "c": 2.0}
    found = combine(mode, vector, keyword, limit=2)  # type: ignore[arg-type]
    assert [i for i, _ in found] == expected
