"""Search ranking: the definitions (keywords in English and Chinese, filters, relative score
fusion, RRF), and the fast path returning exactly what they return."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from bench.search_eval.definitions import (
    Fusion,
    combine,
    fused,
    keyword_scores,
    ranking,
    relative_fused,
)
from handlers.search import (
    VECTOR_WEIGHT,
    FilterColumns,
    Filters,
    KeywordIndex,
    SearchMode,
    ranked,
    tokens,
)

MODES: tuple[SearchMode, ...] = ("vector", "keyword", "hybrid")

# -- the definitions -------------------------------------------------------------------------------


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


def test_latin_letters_inside_a_chinese_word_are_single_tokens() -> None:
    latin = ["i", "p", "h", "o", "n", "e", "1", "2"]
    assert tokens("用户iPhone12很好") == ["用", "户", "用户", *latin, "很", "好", "很好"]


def _tokens_char_by_char(text: str) -> list[str]:
    """The tokenizer as first written: one character at a time."""
    cjk = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
    found: list[str] = []
    for word in re.findall(r"[^\W_]+", text.casefold()):
        if not cjk.search(word):
            found.append(word)
            continue
        run = ""
        for char in [*word, " "]:
            if cjk.match(char):
                run += char
                continue
            if run:
                found.extend(run)
                found.extend(run[i : i + 2] for i in range(len(run) - 1))
                run = ""
            if char != " ":
                found.append(char)
    return found


def test_tokens_equal_the_character_by_character_definition_on_random_mixed_text() -> None:
    rng = random.Random(4)
    alphabet = "ab Z9_-.,，。用户喜欢咖啡ÄßΣ\u3400\uf900\n"
    for _ in range(2000):
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 25)))
        assert tokens(text) == _tokens_char_by_char(text), text


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


def test_rrf_rewards_agreement_between_rankings() -> None:
    scores = fused([["a", "b", "c"], ["b", "c", "a"]])
    assert ranking(scores)[0] == "b"
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)


def test_relative_fusion_normalises_similarities_over_the_candidates_and_bm25_by_the_best() -> None:
    vector = {"a": 0.9, "b": 0.7, "c": 0.5}
    keyword = {"a": 0.0, "b": 4.0, "c": 2.0, "d": 1.0}
    scores = relative_fused(vector, keyword, weight=0.9)
    assert scores["a"] == pytest.approx(0.9 * 1.0)
    assert scores["b"] == pytest.approx(0.9 * 0.5 + 0.1 * 1.0)
    assert scores["c"] == pytest.approx(0.9 * 0.0 + 0.1 * 0.5)
    assert scores["d"] == pytest.approx(0.1 * 0.25)  # a keyword match without a vector


def test_relative_fusion_leaves_out_memories_with_neither_a_vector_nor_a_keyword_match() -> None:
    assert set(relative_fused({"a": 0.3}, {"a": 0.0, "b": 0.0, "c": 1.0})) == {"a", "c"}


def test_relative_fusion_of_a_single_or_equal_similarities_scores_them_zero() -> None:
    assert relative_fused({"a": 0.4}, {"a": 0.0}) == {"a": 0.0}
    assert relative_fused({"a": 0.4, "b": 0.4}, {}) == {"a": 0.0, "b": 0.0}
    assert relative_fused({}, {}) == {}


def test_a_strong_vector_match_beats_a_memory_that_only_shares_common_words() -> None:
    # The labelled set's failure of RRF: "the user" shared by a distractor outranked the answer.
    vector = {"answer": 0.95, "distractor": 0.80, "other": 0.78}
    keyword = {"answer": 0.0, "distractor": 2.0, "other": 0.5}
    assert combine("hybrid", vector, keyword, 3)[0][0] == "answer"
    assert combine("hybrid", vector, keyword, 3, fusion="rrf")[0][0] == "distractor"


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("vector", ["a", "b"]), ("keyword", ["c"]), ("hybrid", ["a", "b"])],
)
def test_combine_by_mode(mode: SearchMode, expected: list[str]) -> None:
    vector = {"a": 0.9, "b": 0.8, "c": 0.7}
    keyword = {"a": 0.0, "b": 0.0, "c": 2.0}
    found = combine(mode, vector, keyword, limit=2)
    assert [i for i, _ in found] == expected


def test_combine_breaks_ties_by_id_and_returns_nothing_for_a_limit_below_one() -> None:
    vector = {"b": 0.5, "a": 0.5, "c": 0.9}
    assert [i for i, _ in combine("vector", vector, {}, 3)] == ["c", "a", "b"]
    assert combine("vector", vector, {}, 0) == []
    assert combine("vector", vector, {}, -1) == []


WHEN = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def test_filters_compare_subject_case_insensitively_and_times_inclusively() -> None:
    memory = {
        "memory_type": "semantic",
        "agent_id": "a1",
        "subject": "The User",
        "owner": "user",
        "category": "food",
        "created_at": WHEN,
    }
    assert Filters(subject="the user", since=WHEN, until=WHEN).matches(memory)
    assert Filters(types=["semantic", "episodic"], agent_id="a1", category="food").matches(memory)
    assert Filters(types=[]).matches(memory)  # empty: no condition
    assert not Filters(types=["episodic"]).matches(memory)
    assert not Filters(owner="agent").matches(memory)
    assert not Filters(since=WHEN + timedelta(microseconds=1)).matches(memory)
    assert not Filters(until=WHEN.replace(tzinfo=None)).matches(memory | {"created_at": None})
    assert Filters(until=WHEN.replace(tzinfo=None)).matches(memory)  # naive is UTC


# -- the fast path equals the definitions ----------------------------------------------------------

WORDS = ["the", "user", "tea", "coffee", "green", "works", "at", "stripe", "lives", "in", "porto"]
CHARS = "用户喜欢喝绿茶咖啡住在里斯本对花生过敏"


def _text(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.45:
        return " ".join(rng.choices(WORDS, k=rng.randint(1, 9)))
    if kind < 0.85:
        return "".join(rng.choices(CHARS, k=rng.randint(1, 12)))
    if kind < 0.95:
        return rng.choice(WORDS) + " " + "".join(rng.choices(CHARS, k=3)) + "x2"
    return rng.choice(["", "...", "_"])  # no tokens at all


def _queries(rng: random.Random) -> list[str]:
    return [_text(rng) for _ in range(6)] + ["", "zzz", "the user", "用户"]


def test_keyword_postings_score_exactly_like_keyword_scores_over_the_chosen_texts() -> None:
    rng = random.Random(1)
    for _ in range(30):
        texts = [_text(rng) for _ in range(rng.randint(0, 40))]
        keywords = KeywordIndex.built(texts)
        masks = [np.ones(len(texts), dtype=np.bool_), np.zeros(len(texts), dtype=np.bool_)]
        masks.append(np.asarray([rng.random() < 0.5 for _ in texts], dtype=np.bool_))
        for chosen in masks:
            subset = [t for t, keep in zip(texts, chosen, strict=True) if keep]
            for query in _queries(rng):
                found = keywords.scores(query, chosen)
                assert found[chosen].tolist() == keyword_scores(query, subset)  # equal floats
                assert not found[~chosen].any()


def _ranked_by_definition(
    mode: SearchMode,
    similarity: list[float],
    with_vector: list[bool],
    keyword: list[float],
    chosen: list[bool],
    ids: list[str],
    limit: int,
    fusion: Fusion = "relative",
    weight: float = VECTOR_WEIGHT,
) -> list[tuple[str, float]]:
    vector = {ids[p]: similarity[p] for p in range(len(ids)) if with_vector[p]}
    keywords = {ids[p]: keyword[p] for p in range(len(ids)) if chosen[p]}
    return combine(mode, vector, keywords, limit, fusion=fusion, weight=weight)


def _tie_order(ids: list[str]) -> np.ndarray[Any, np.dtype[np.int64]]:
    order = np.empty(len(ids), dtype=np.int64)
    order[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    return order


@pytest.mark.parametrize("seed", range(40))
def test_ranked_equals_combine_on_random_scores_with_ties(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([0, 1, 2, 7, 30, 200])
    ids = [f"m{rng.randrange(10**6):06d}-{p}" for p in range(n)]
    # few distinct values, so ties abound, in both scores and across the partition's cut
    similarity = [rng.choice([-0.2, 0.0, 0.31, 0.5, 0.5, 0.87]) for _ in range(n)]
    chosen = [rng.random() < 0.8 for _ in range(n)]
    with_vector = [c and rng.random() < 0.9 for c in chosen]
    keyword = [rng.choice([0.0, 0.0, 0.7, 1.25, 3.0]) if c else 0.0 for c in chosen]
    arrays = (
        np.asarray(similarity, dtype=np.float64),
        np.asarray(with_vector, dtype=np.bool_),
        np.asarray(keyword, dtype=np.float64),
        np.asarray(chosen, dtype=np.bool_),
        _tie_order(ids),
    )
    for mode in MODES:
        for limit in (0, 1, 3, 10, n, n + 5):
            for weight in (VECTOR_WEIGHT, 0.5, 1.0):
                fast = ranked(mode, *arrays, limit, weight=weight)
                expected = _ranked_by_definition(
                    mode, similarity, with_vector, keyword, chosen, ids, limit, weight=weight
                )
                assert [(ids[p], s) for p, s in fast] == expected, (mode, limit, weight)


def test_ranked_equals_combine_on_continuous_scores_across_magnitudes() -> None:
    rng = np.random.default_rng(5)
    n = 5000
    ids = [f"{p:05d}" for p in rng.permutation(n)]
    similarity = rng.standard_normal(n).astype(np.float32).astype(np.float64)
    keyword = np.where(rng.random(n) < 0.3, rng.exponential(2.0, n), 0.0)
    chosen = rng.random(n) < 0.7
    keyword[~chosen] = 0.0
    with_vector = chosen & (rng.random(n) < 0.95)
    for mode in MODES:
        for limit in (10, n):
            fast = ranked(mode, similarity, with_vector, keyword, chosen, _tie_order(ids), limit)
            expected = _ranked_by_definition(
                mode,
                similarity.tolist(),
                with_vector.tolist(),
                keyword.tolist(),
                chosen.tolist(),
                ids,
                limit,
            )
            assert [(ids[p], s) for p, s in fast] == expected


def test_a_search_with_nothing_chosen_finds_nothing() -> None:
    empty = np.zeros(4, dtype=np.bool_)
    scores = np.ones(4, dtype=np.float64)
    for mode in MODES:
        assert ranked(mode, scores, empty, np.zeros(4), empty, np.arange(4), 10) == []
    none = np.zeros(0, dtype=np.bool_)
    assert ranked("hybrid", np.zeros(0), none, np.zeros(0), none, np.zeros(0, np.int64), 5) == []


def _documents(rng: random.Random, n: int) -> list[dict[str, Any]]:
    return [
        {
            "memory_type": rng.choice(["semantic", "episodic", "procedural", "taxonomic"]),
            "agent_id": rng.choice([None, "a1", "a2"]),
            "subject": rng.choice(["the user", "The User", "John", "assistant", None]),
            "owner": rng.choice(["user", "agent"]),
            "category": rng.choice([None, "food", "work"]),
            "created_at": rng.choice(
                [
                    None,
                    WHEN + timedelta(minutes=rng.randint(-5, 5)),
                    (WHEN + timedelta(minutes=rng.randint(-5, 5))).replace(tzinfo=None),
                    WHEN.astimezone(timezone(timedelta(hours=8)))
                    + timedelta(minutes=rng.randint(-5, 5)),
                ]
            ),
        }
        for _ in range(n)
    ]


def _filters(rng: random.Random) -> Filters:
    def maybe(*values: Any) -> Any:
        return rng.choice([None, *values])

    return Filters(
        types=maybe([], ["semantic"], ["episodic", "taxonomic"], ["unknown"]),
        agent_id=maybe("a1", "a3"),
        subject=maybe("THE USER", "john", "nobody"),
        owner=maybe("user", "agent"),
        category=maybe("food", "other"),
        since=maybe(
            WHEN, WHEN - timedelta(minutes=3), (WHEN + timedelta(minutes=2)).replace(tzinfo=None)
        ),
        until=maybe(WHEN, WHEN + timedelta(minutes=1)),
    )


def test_filter_masks_hold_exactly_where_the_filters_match() -> None:
    rng = random.Random(7)
    for n in (0, 1, 50, 300):
        documents = _documents(rng, n)
        columns = FilterColumns.built(documents)
        for _ in range(60):
            filters = _filters(rng)
            expected = [filters.matches(d) for d in documents]
            assert columns.mask(filters).tolist() == expected, filters
