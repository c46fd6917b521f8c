"""The search evaluation: its scores on hand-made rankings, its labelled set, and the SDK's
search returning exactly what the definitions return (no embedding model needed)."""

from __future__ import annotations

import math
import random
from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from bench.search_eval.dataset import (
    CREATED,
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
from bench.search_eval.definitions import fused, ranking
from bench.search_eval.language_bias import calibrated, memory_gaps
from bench.search_eval.pipeline import InMemoryReadModel, ranked_ids
from bench.search_eval.quality import RRF, QualityReport, QueryRun, groups
from bench.search_eval.reference import Result, reference_search
from bench.search_eval.report import scale_table
from bench.search_eval.scale import SizeReport
from bench.search_eval.scoring import (
    first_rank,
    markdown_table,
    percentile,
    recall_at,
    reciprocal_rank,
    scores,
)
from bench.search_eval.weights import WEIGHTS, held_out, weight_name
from handlers.cross_lingual import LANGUAGE_BIAS, LOCAL_MODEL, language_of
from handlers.search import Filters, SearchMode
from memstream.sdk.search_index import UserIndex

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


# -- the SDK's search equals the definitions -------------------------------------------------------

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
    "The user drinks tea.",
    "用户对花生过敏。",
]


def _index() -> UserIndex:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((len(TEXTS), 8)).round(1)
    vectors[5] = vectors[4]  # equal similarities too
    vectors[10] = vectors[4]
    user = User("u", tuple(Memory(f"m{i}", "semantic", "the user", t) for i, t in enumerate(TEXTS)))
    return UserIndex.built(1, documents(user, vectors.tolist(), "toy"))


async def _sdk(index: UserIndex, query: str, vector: list[float], model: str, **kw: Any) -> Any:
    found = await InMemoryReadModel({"u": index}).search("u", query, vector, model, **kw)
    return [
        Result(d["memory_id"], d["score"], d["vector_score"], d["keyword_score"]) for d in found
    ]


@pytest.mark.parametrize(
    "query", ["tea", "Does the user drink tea?", "用户喝什么茶", "piano", "zzz", ""]
)
@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
async def test_read_model_search_returns_exactly_the_reference_definition(
    query: str, mode: SearchMode
) -> None:
    index = _index()
    vector = [0.3, -0.1, 0.4, 0.0, 0.2, -0.5, 0.1, 0.9]
    for limit in (len(TEXTS), 3, 0):
        expected = reference_search(index, query, vector, "toy", mode=mode, limit=limit)
        assert await _sdk(index, query, vector, "toy", mode=mode, limit=limit) == expected


def _random_documents(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """Memories of three embedding models (one the local model, whose similarities are corrected
    for a shared language) and of two dimensions, some without a vector."""
    words = ["the", "user", "tea", "coffee", "works", "at", "stripe", "lives", "porto", "john"]
    found = []
    for p in range(n):
        if rng.random() < 0.6:
            text = " ".join(rng.choices(words, k=rng.randint(2, 8)))
        else:
            text = "".join(rng.choices("用户喜欢喝绿茶咖啡住在里斯本", k=rng.randint(2, 10)))
        model, dimension = rng.choice([("a", 6), (LOCAL_MODEL, 6), ("b", 4), ("", 0)])
        found.append(
            {
                "memory_id": f"m{rng.randrange(1000):03d}-{p}",
                "memory_type": rng.choice(MEMORY_TYPES),
                "user_id": "u",
                "agent_id": rng.choice([None, "bot"]),
                "subject": rng.choice(["the user", "John"]),
                "owner": rng.choice(["user", "agent"]),
                "category": rng.choice([None, "food"]),
                "text": text,
                "created_at": CREATED + timedelta(minutes=rng.randint(0, 9)),
                "embedding": [round(rng.gauss(0, 1), 1) for _ in range(dimension)],
                "embedding_model": model,
            }
        )
    return found


@pytest.mark.parametrize("seed", range(8))
async def test_read_model_search_equals_the_reference_on_random_memories_and_filters(
    seed: int,
) -> None:
    rng = random.Random(seed)
    index = UserIndex.built(1, _random_documents(rng, rng.choice([0, 5, 60, 300])))
    for _ in range(12):
        query = rng.choice(["the user", "tea at stripe", "用户喝咖啡", "john porto", "x"])
        model, dimension = rng.choice(
            [("a", 6), (LOCAL_MODEL, 6), (LOCAL_MODEL, 6), ("b", 4), ("a", 4), ("missing", 6)]
        )
        vector = [rng.gauss(0, 1) for _ in range(dimension)]
        filters = rng.choice(
            [
                Filters(),
                Filters(types=["semantic", "episodic"]),
                Filters(subject="JOHN", agent_id="bot"),
                Filters(owner="user", category="food", since=CREATED + timedelta(minutes=3)),
                Filters(until=CREATED + timedelta(minutes=4)),
            ]
        )
        for mode in ("vector", "keyword", "hybrid"):
            limit = rng.choice([1, 5, 10, 400])
            expected = reference_search(
                index, query, vector, model, mode=mode, limit=limit, filters=filters
            )
            found = await _sdk(
                index,
                query,
                vector,
                model,
                mode=mode,
                limit=limit,
                filters=filters,
            )
            assert found == expected


async def test_ranked_ids_are_the_read_models_order_of_memory_ids() -> None:
    index = _index()
    ids = await ranked_ids(
        InMemoryReadModel({"u": index}), "u", "tea", [1.0] * 8, "toy", mode="keyword", limit=20
    )
    found = reference_search(index, "tea", [1.0] * 8, "toy", mode="keyword", limit=20)
    assert ids == [r.memory_id for r in found]
    assert ids[:3] == ["m10", "m4", "m5"]  # three equal texts: ties by memory id


def test_rrf_in_the_reference_fuses_the_vector_and_keyword_rankings() -> None:
    index = _index()
    vector = [0.3, -0.1, 0.4, 0.0, 0.2, -0.5, 0.1, 0.9]

    def ids(mode: SearchMode) -> list[str]:
        found = reference_search(index, "the piano", vector, "toy", mode=mode, limit=99)
        return [r.memory_id for r in found]

    rrf = reference_search(index, "the piano", vector, "toy", mode="hybrid", limit=99, fusion="rrf")
    expected = fused([ids("vector"), ids("keyword")])
    assert [(r.memory_id, r.score) for r in rrf] == [(i, expected[i]) for i in ranking(expected)]


def test_the_reference_takes_the_bias_off_the_query_languages_memories_only() -> None:
    rng = random.Random(4)
    index = UserIndex.built(1, _random_documents(rng, 80))
    texts = {d["memory_id"]: d["text"] for d in index.documents}
    vector = [rng.gauss(0, 1) for _ in range(6)]
    for query, language in (("用户喝咖啡", "zh"), ("the user", "en")):
        bias = LANGUAGE_BIAS[LOCAL_MODEL][language]  # type: ignore[index]
        plain = reference_search(
            index, query, vector, LOCAL_MODEL, mode="vector", limit=80, language_bias={}
        )
        corrected = reference_search(index, query, vector, LOCAL_MODEL, mode="vector", limit=80)
        assert plain and all(r.score == r.vector_score for r in plain)
        assert sorted(r.memory_id for r in plain) == sorted(r.memory_id for r in corrected)
        for r in corrected:
            same = language_of(texts[r.memory_id]) == language
            assert r.score == (r.vector_score - bias if same else r.vector_score)  # type: ignore[operator]


# -- the language bias -----------------------------------------------------------------------------


def _store(user_id: str, memories: list[tuple[str, list[float]]]) -> UserIndex:
    user = User(
        user_id,
        tuple(
            Memory(f"{user_id}-{i}", "semantic", "the user", t) for i, (t, _) in enumerate(memories)
        ),
    )
    return UserIndex.built(1, documents(user, [v for _, v in memories], LOCAL_MODEL))


def test_the_bias_is_each_memorys_mean_cosine_to_its_language_minus_to_the_other() -> None:
    # unit vectors: the two Chinese memories at cosine 0.8, each at cosine 0.6 / 0 to the English
    index = _store(
        "u",
        [
            ("用户喜欢绿茶。", [1.0, 0.0, 0.0]),
            ("用户住在里斯本。", [0.8, 0.6, 0.0]),
            ("The user drinks tea.", [0.6, 0.0, 0.8]),
        ],
    )
    gaps = memory_gaps(index, LOCAL_MODEL)
    assert gaps["zh"] == pytest.approx([0.8 - 0.6, 0.8 - 0.48])
    assert "en" not in gaps  # no other English memory to compare with
    assert memory_gaps(index, "another model") == {}
    monolingual = _store("v", [("The user drinks tea.", [1.0, 0.0]), ("Tea.", [0.0, 1.0])])
    found = calibrated({"u": index, "v": monolingual}, LOCAL_MODEL)
    assert found["bias"] == {"zh": pytest.approx(0.26)}
    assert found["memories"] == {"zh": 2}
    assert found["per_user"]["v"] == {}


# -- the weight's held-out check -------------------------------------------------------------------


def test_the_held_out_check_chooses_the_weight_on_one_half_and_scores_it_on_the_other() -> None:
    users = tuple(User(u, (Memory(f"{u}-a", "semantic", "the user", "t"),)) for u in "pqrs")
    queries = tuple(Query(f"q{u.user_id}", u.user_id, "t", (f"{u.user_id}-a",)) for u in users)
    data = LabelledSet(users, queries)
    weights, sdk = QualityReport(), QualityReport()

    def run(report: QualityReport, ranker: str, user: str, answer_rank: int) -> None:
        ranked = tuple([f"x{i}" for i in range(answer_rank - 1)] + [f"{user}-a"])
        report.runs.append(QueryRun(f"q{user}", ranker, ranked, (f"{user}-a",), 0.0))

    for w in WEIGHTS:  # users p and q answer first at 0.3, r and s at 0.8, else second
        for user in "pqrs":
            best = 0.3 if user in "pq" else 0.8
            run(weights, weight_name(w), user, 1 if w == best else 2)
    for user in "pqrs":
        run(sdk, "vector", user, 2)
        run(sdk, RRF, user, 4)
    splits = {tuple(s["train"]): s for s in held_out(data, weights, sdk)}
    assert len(splits) == 6
    assert splits[("p", "q")]["chosen_weight"] == 0.3
    assert splits[("p", "q")]["test_scores"]["chosen weight"]["mrr"] == 0.5
    assert splits[("r", "s")]["test_scores"]["chosen weight"]["mrr"] == 0.5
    # one user of each kind: both weights tie on train MRR, the smaller one is chosen
    assert splits[("p", "r")]["chosen_weight"] == 0.3
    assert splits[("p", "r")]["test_scores"]["chosen weight"]["mrr"] == 0.75
    assert splits[("p", "r")]["test_scores"][RRF]["mrr"] == 0.25


def test_the_baseline_ratio_compares_the_definitions_with_the_sdk_on_the_same_queries() -> None:
    report = SizeReport(1000)
    report.build = [0.01]
    report.keyword_build = [0.005]
    for name in report.search:
        report.search[name] = [0.002, 0.004, 0.9, 0.9]  # the last two: queries not checked
    report.reference["hybrid"] = [0.2, 0.4]
    report.reference["hybrid, one type"] = [0.1, 0.1]

    summary = report.summary()

    against = summary["reference"]["by_search"]["hybrid"]
    assert against["sdk_ms"]["p50"] == pytest.approx(3.0)
    assert against["ratio_p50"] == pytest.approx(100.0)
    assert summary["reference"]["searches"] == 4
    assert "100x" in scale_table([summary])
