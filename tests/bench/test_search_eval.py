"""The search evaluation: its scores on hand-made rankings, its labelled set, and the proposed
fast path ranking exactly like the SDK (no embedding model needed)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from bench.search_eval.dataset import (
    MEMORY_TYPES,
    DataFormatError,
    LabelledSet,
    Memory,
    Query,
    User,
    documents,
    load,
    parse,
)
from bench.search_eval.fast import FastIndex, KeywordIndex
from bench.search_eval.pipeline import InMemoryReadModel, ranked_ids
from bench.search_eval.quality import groups
from bench.search_eval.scoring import (
    first_rank,
    markdown_table,
    percentile,
    recall_at,
    reciprocal_rank,
    scores,
)
from bench.search_eval.variants import relative_score_fusion
from handlers.search import SearchMode, combine, keyword_scores
from memstream.search_index import UserIndex

# -- scores ----------------------------------------------------------------------------------------


def test_recall_at_1_misses_an_answer_ranked_second_that_recall_at_5_finds() -> None:
    ranked = ["a", "b", "c", "d", "e", "f"]
    assert recall_at(ranked, {"b"}, 1) == 0.0
    assert recall_at(ranked, {"b"}, 5) == 1.0


def test_recall_counts_the_share_of_several_answers_found_in_the_top_k() -> None:
    ranked = ["a", "b", "c", "d", "e", "f"]
    assert recall_at(ranked, {"a", "f"}, 5) == 0.5
    assert recall_at(ranked, {"a", "c", "x"}, 5) == pytest.approx(2 / 3)


def test_recall_of_an_answer_the_mode_did_not_rank_at_all_is_zero() -> None:
    assert recall_at(["a", "b"], {"z"}, 5) == 0.0
    assert recall_at([], {"z"}, 5) == 0.0


def test_a_query_without_answers_is_refused() -> None:
    with pytest.raises(ValueError):
        recall_at(["a"], set(), 1)


def test_reciprocal_rank_is_one_over_the_position_of_the_first_answer() -> None:
    assert reciprocal_rank(["a", "b", "c"], {"a"}) == 1.0
    assert reciprocal_rank(["a", "b", "c"], {"c"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(["a", "b", "c", "d"], {"d", "b"}) == 0.5
    assert reciprocal_rank(["a", "b"], {"z"}) == 0.0
    assert first_rank(["a", "b", "c"], {"c"}) == 3
    assert first_rank(["a"], {"z"}) is None


def test_scores_are_means_over_queries_each_weighing_the_same() -> None:
    found = scores(
        [
            (["a", "b"], {"a"}),  # r@1 1, r@5 1, rr 1
            (["a", "b", "c"], {"c", "z"}),  # r@1 0, r@5 1/2, rr 1/3
            (["a"], {"z"}),  # 0, 0, 0
        ]
    )
    assert found.queries == 3
    assert found.recall_at_1 == pytest.approx(1 / 3)
    assert found.recall_at_5 == pytest.approx(0.5)
    assert found.mrr == pytest.approx((1 + 1 / 3) / 3)


def test_scores_of_no_queries_are_zero() -> None:
    assert scores([]).queries == 0
    assert scores([]).mrr == 0.0


def test_percentiles_interpolate_between_the_closest_ranks() -> None:
    values = [float(v) for v in range(20, 0, -1)]  # unsorted on purpose
    assert percentile(values, 50) == pytest.approx(10.5)
    assert percentile(values, 95) == pytest.approx(19.05)
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 20.0
    assert percentile([7.0], 95) == 7.0
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError):
        percentile(values, 101)


def test_markdown_table_pads_columns_and_right_aligns_numbers() -> None:
    table = markdown_table(["mode", "MRR"], [["vector", "0.8"], ["keyword", "0.61"]])
    assert table.splitlines() == [
        "| mode    |  MRR |",
        "|---------|-----:|",
        "| vector  |  0.8 |",
        "| keyword | 0.61 |",
    ]


# -- the labelled set ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def labelled() -> LabelledSet:
    return load()


def test_the_labelled_set_has_the_size_and_mix_the_evaluation_promises(
    labelled: LabelledSet,
) -> None:
    assert len(labelled.users) >= 3
    for user in labelled.users:
        assert 30 <= len(user.memories) <= 80, user.user_id
        assert {m.memory_type for m in user.memories} == set(MEMORY_TYPES), user.user_id
        assert any(m.subject == "assistant" and m.owner == "agent" for m in user.memories)
    queries = labelled.queries
    assert len(queries) >= 60
    assert sum(q.language == "zh" for q in queries) * 3 >= len(queries)
    cross = [q for q in queries if labelled.is_cross_lingual(q)]
    assert {q.language for q in cross} == {"en", "zh"}
    assert all(1 <= len(q.answers) <= 3 for q in queries)


def test_an_answer_from_another_users_store_is_refused() -> None:
    raw: dict[str, Any] = {
        "users": [
            {
                "user_id": "a",
                "memories": [{"id": "a1", "type": "semantic", "subject": "x", "text": "t"}],
            },
            {
                "user_id": "b",
                "memories": [{"id": "b1", "type": "semantic", "subject": "x", "text": "t"}],
            },
        ],
        "queries": [{"id": "q", "user_id": "a", "text": "t", "answers": ["b1"]}],
    }
    with pytest.raises(DataFormatError, match="b1 is not a memory of a"):
        parse(raw)


def test_a_query_is_cross_lingual_only_when_no_answer_is_in_its_language() -> None:
    user = User(
        "u",
        (
            Memory("en", "semantic", "the user", "The user drinks tea."),
            Memory("zh", "semantic", "the user", "用户喜欢喝茶。"),
        ),
    )
    data = LabelledSet(
        (user,),
        (
            Query("q-en-zh", "u", "What does the user drink?", ("zh",)),
            Query("q-both", "u", "用户喝什么？", ("en", "zh")),
            Query("q-zh-en", "u", "用户喝什么？", ("en",)),
        ),
    )
    named = groups(data)
    assert named["cross-lingual"] == {"q-en-zh", "q-zh-en"}
    assert named["same language"] == {"q-both"}
    assert named["cross-lingual, query in zh"] == {"q-zh-en"}


# -- the SDK's ranking and the proposed fast path --------------------------------------------------

TEXTS = [
    "The user drinks green tea every morning.",
    "The user is allergic to peanuts.",
    "用户喜欢喝绿茶。",
    "Anna drinks coffee.",
    "The user drinks tea.",
    "The user drinks tea.",  # an exact duplicate: equal keyword scores, ties broken by id
    "用户每天早上喝咖啡。",
    "Leo plays the piano.",
    "The user's tea is green.",
    "The assistant recommended oolong tea.",
    "The user drinks tea.",  # position 10: its id "10" sorts before "2"
    "用户对花生过敏。",
]


def _index() -> UserIndex:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((len(TEXTS), 8)).round(1)
    vectors[5] = vectors[4]  # equal similarities too
    vectors[10] = vectors[4]
    user = User("u", tuple(Memory(f"m{i}", "semantic", "the user", t) for i, t in enumerate(TEXTS)))
    return UserIndex.built(1, documents(user, vectors.tolist(), "toy"))


@pytest.mark.parametrize(
    "query", ["tea", "Does the user drink tea?", "用户喝什么茶", "piano", "zzz"]
)
@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
async def test_the_fast_path_returns_exactly_what_read_model_search_returns(
    query: str, mode: SearchMode
) -> None:
    index = _index()
    vector = [0.3, -0.1, 0.4, 0.0, 0.2, -0.5, 0.1, 0.9]
    expected = await InMemoryReadModel({"u": index}).search(
        "u", query, vector, "toy", mode=mode, limit=len(TEXTS)
    )
    fast = FastIndex.built(index).search(query, vector, "toy", mode=mode, limit=len(TEXTS))
    assert [(f"m{p}", s) for p, s in fast] == [(d["memory_id"], d["score"]) for d in expected]
    top3 = FastIndex.built(index).search(query, vector, "toy", mode=mode, limit=3)
    assert top3 == fast[:3]


def test_keyword_postings_score_exactly_like_keyword_scores_over_the_chosen_texts() -> None:
    keywords = KeywordIndex.built(TEXTS)
    chosen = np.array([i % 3 != 1 for i in range(len(TEXTS))])
    for query in ["The user drinks tea", "用户喝绿茶", "peanuts allergy"]:
        subset = [t for t, keep in zip(TEXTS, chosen, strict=True) if keep]
        expected = keyword_scores(query, subset)
        found = keywords.scores(query, chosen)
        assert found[chosen].tolist() == expected
        assert not found[~chosen].any()


def test_ignoring_tokens_in_most_memories_drops_matches_on_the_alone() -> None:
    keywords = KeywordIndex.built(TEXTS)
    everything = np.ones(len(TEXTS), dtype=np.bool_)
    plain = keywords.scores("the piano", everything)
    common = keywords.scores("the piano", everything, common_share=0.5)
    assert (plain > 0).sum() > 1
    assert np.flatnonzero(common).tolist() == [7]  # "Leo plays the piano."


async def test_ranked_ids_are_the_read_models_order_of_memory_ids() -> None:
    index = _index()
    vector = [1.0] * 8
    ids = await ranked_ids(
        InMemoryReadModel({"u": index}), "u", "tea", vector, "toy", mode="keyword", limit=20
    )
    texts = [str(d["text"]) for d in index.documents]
    keyword = {str(p): s for p, s in enumerate(keyword_scores("tea", texts))}
    assert ids == [f"m{key}" for key, _ in combine("keyword", {}, keyword, 20)]


def test_relative_score_fusion_lets_a_strong_vector_match_beat_a_keyword_only_match() -> None:
    vector = {"answer": 0.95, "distractor": 0.80, "other": 0.78}
    keyword = {"distractor": 2.0, "other": 0.5}
    assert next(k for k, _ in relative_score_fusion(vector, keyword, 3, weight=0.9)) == "answer"
    # RRF (the SDK's hybrid) puts the memory found by both rankings first
    assert combine("hybrid", vector, keyword, 3)[0][0] == "distractor"
