"""The correction of similarities for a shared language: the rule on ids, the same floats on
arrays, the model figures, and what it does to a cross-lingual ranking."""

from __future__ import annotations

import random

import numpy as np
import pytest

from bench.search_eval.definitions import combine
from handlers.cross_lingual import (
    LANGUAGE_BIAS,
    LOCAL_MODEL,
    corrected_array,
    corrected_similarities,
    language_of,
    same_language_bias,
)
from handlers.rendering import Language, detect_language
from memstream.providers.local_embedder import MODEL_NAME


def test_memories_in_the_query_language_lose_the_bias_and_the_others_keep_their_cosine() -> None:
    similarity = {"zh-1": 0.86, "zh-2": 0.85, "en-1": 0.84}
    languages: dict[str, Language] = {"zh-1": "zh", "zh-2": "zh", "en-1": "en"}
    assert corrected_similarities(similarity, languages, "zh", 0.09) == {
        "zh-1": 0.86 - 0.09,
        "zh-2": 0.85 - 0.09,
        "en-1": 0.84,
    }


@pytest.mark.parametrize("query_language", ["zh", "en"])
def test_candidates_all_in_one_language_are_left_as_they_are(query_language: Language) -> None:
    similarity = {"a": 0.9, "b": 0.8}
    languages: dict[str, Language] = {"a": "zh", "b": "zh"}
    assert corrected_similarities(similarity, languages, query_language, 0.09) == similarity
    assert corrected_similarities({}, {}, query_language, 0.09) == {}


def test_a_model_without_measured_figures_is_not_corrected() -> None:
    assert same_language_bias("text-embedding-3-small", "zh") == 0.0
    similarity = {"a": 0.9, "b": 0.8}
    languages: dict[str, Language] = {"a": "zh", "b": "en"}
    assert corrected_similarities(similarity, languages, "zh", 0.0) == similarity


def test_the_local_models_figures_are_keyed_by_the_embedders_model_name() -> None:
    assert LOCAL_MODEL == MODEL_NAME
    assert same_language_bias(MODEL_NAME, "zh") == LANGUAGE_BIAS[MODEL_NAME]["zh"] == 0.090
    assert same_language_bias(MODEL_NAME, "en") == LANGUAGE_BIAS[MODEL_NAME]["en"] == 0.024


def test_languages_are_told_by_script() -> None:
    assert language_of("我对什么过敏？") == "zh"
    assert language_of("The user is allergic to shrimp.") == "en"
    assert language_of("") == "en"


def test_a_chinese_query_ranks_its_english_answer_above_chinese_distractors() -> None:
    """Cosines as e5 gives them: Chinese texts about other people score above the English
    answer until the shared language's bias is taken off."""
    similarity = {"lina-shellfish": 0.86, "yueyue-allergy": 0.85, "user-shrimp": 0.84}
    languages: dict[str, Language] = {
        "lina-shellfish": "zh",
        "yueyue-allergy": "zh",
        "user-shrimp": "en",
    }
    before = combine("vector", similarity, {}, 3)
    after = combine("vector", corrected_similarities(similarity, languages, "zh", 0.09), {}, 3)
    assert before[0][0] == "lina-shellfish"
    assert after[0][0] == "user-shrimp"
    assert after[0][1] == 0.84  # the answer's own cosine, unchanged


@pytest.mark.parametrize("seed", range(10))
def test_the_array_rule_gives_exactly_the_floats_of_the_definition(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([0, 1, 2, 7, 60])
    similarity = np.asarray([rng.uniform(-1, 1) for _ in range(n)], dtype=np.float64)
    languages = np.asarray([rng.choice(["en", "zh"]) for _ in range(n)], dtype="<U2")
    with_vector = np.asarray([rng.random() < 0.8 for _ in range(n)], dtype=np.bool_)
    if rng.random() < 0.3:  # sometimes every candidate in one language
        languages[:] = rng.choice(["en", "zh"])
    for query_language in ("en", "zh"):
        bias = rng.choice([0.0, 0.024, 0.09])
        found = corrected_array(similarity, with_vector, languages == query_language, bias)
        ids = [f"m{p}" for p in range(n) if with_vector[p]]
        expected = corrected_similarities(
            {f"m{p}": float(similarity[p]) for p in range(n) if with_vector[p]},
            {f"m{p}": str(languages[p]) for p in range(n)},  # type: ignore[misc]
            query_language,  # type: ignore[arg-type]
            bias,
        )
        assert {i: float(found[int(i[1:])]) for i in ids} == expected


def test_languages_are_detect_language_of_each_text_alone_on_random_mixed_text() -> None:
    rng = random.Random(3)
    alphabet = "ab Zé用户喝茶。1,\U00020000\u3400\uf900!"
    for _ in range(2000):
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 12)))
        assert language_of(text) == detect_language([text])
