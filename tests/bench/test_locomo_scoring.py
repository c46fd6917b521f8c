"""LoCoMo scoring: the paper's F1 normalisation and category rules, mem0's F1, the judge's
label, and the per-category summary without the adversarial category."""

from __future__ import annotations

import pytest

from bench.locomo.dataset import QA
from bench.locomo.scoring import (
    Scored,
    judge_label,
    locomo_f1,
    mem0_f1,
    multi_hop_f1,
    normalize_answer,
    scored,
    summarize,
    token_f1,
)


def qa(answer: str, category: int) -> QA:
    return QA(question="q?", answer=answer, category=category)


def test_normalisation_drops_case_punctuation_articles_and_the_word_and() -> None:
    assert normalize_answer("The Blue, Bowl and a Vase!") == "blue bowl vase"
    assert normalize_answer("  An   apple.  ") == "apple"


def test_normalisation_keeps_article_letters_inside_words() -> None:
    assert normalize_answer("Theatre and Anthem") == "theatre anthem"


def test_token_f1_matches_stemmed_tokens() -> None:
    assert token_f1("running races", "She runs a race") == pytest.approx(
        2 * 1.0 * (2 / 3) / (1 + 2 / 3)
    )


def test_token_f1_counts_tokens_as_a_multiset() -> None:
    # "pepper pepper" shares one "pepper" with the gold answer: precision 1/2, recall 1.
    assert token_f1("Pepper Pepper", "Pepper") == pytest.approx(2 / 3)


def test_token_f1_is_zero_without_common_tokens_or_for_an_empty_answer() -> None:
    assert token_f1("Lisbon", "Madrid") == 0.0
    assert token_f1("", "Madrid") == 0.0
    assert token_f1("the", "Madrid") == 0.0


def test_multi_hop_splits_both_answers_at_commas_and_averages_over_gold_parts() -> None:
    assert multi_hop_f1("green vase, blue bowl", "blue bowl, green vase") == 1.0
    assert multi_hop_f1("blue bowl", "blue bowl, green vase") == 0.5
    assert locomo_f1("Rosa", qa("Rosa, Lena", 1)) == 0.5


def test_multi_hop_answer_in_one_piece_scores_lower_than_split_by_commas() -> None:
    # The paper's rule, kept as is: without commas the prediction is one part.
    assert locomo_f1("Rosa and Lena", qa("Rosa, Lena", 1)) < 1.0


def test_open_domain_scores_the_gold_text_before_the_semicolon() -> None:
    assert locomo_f1("yes", qa("Yes; she runs every morning", 3)) == 1.0


def test_single_hop_and_temporal_use_plain_f1() -> None:
    assert locomo_f1("7 May 2023", qa("7 May 2023", 2)) == 1.0
    assert locomo_f1("border collie", qa("border collie mix", 4)) == pytest.approx(0.8)


def test_adversarial_questions_are_not_scored() -> None:
    adversarial = QA(question="q?", answer="", category=5, adversarial_answer="Pepper")
    with pytest.raises(ValueError, match="adversarial"):
        locomo_f1("Pepper", adversarial)
    assert scored([qa("a", 1), adversarial, qa("b", 4)]) == [qa("a", 1), qa("b", 4)]


def test_mem0_f1_compares_token_sets_without_stemming_or_articles() -> None:
    assert mem0_f1("the race, the race!", "The race") == 1.0
    assert mem0_f1("races", "race") == 0.0
    assert mem0_f1("", "race") == 0.0


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ('{"label": "CORRECT"}', True),
        ('{"label": "wrong"}', False),
        ('```json\n{"label": "CORRECT"}\n```', True),
        ("The answer names the same city. CORRECT", True),
        ("WRONG", False),
        ("CORRECT or WRONG, hard to say", None),
        ('{"label": "maybe"}', None),
        ("", None),
    ],
)
def test_judge_label_reads_json_or_a_single_plain_label(reply: str, label: bool | None) -> None:
    assert judge_label(reply) is label


def test_summary_reports_each_category_by_name_and_overall_over_questions() -> None:
    rows = [
        Scored(1, 0.5, 0.4, True),
        Scored(4, 1.0, 1.0, True),
        Scored(4, 0.0, 0.0, False),
        Scored(2, 1.0, 1.0, None),
    ]
    summary = summarize(rows)
    assert list(summary) == ["multi-hop", "temporal", "single-hop", "overall"]
    assert summary["single-hop"] == {
        "questions": 2,
        "f1": 0.5,
        "mem0_f1": 0.5,
        "j": 0.5,
        "judged": 2,
    }
    assert summary["temporal"]["j"] is None
    assert summary["overall"]["f1"] == pytest.approx(2.5 / 4)
    assert summary["overall"]["j"] == pytest.approx(2 / 3)
    assert summary["overall"]["judged"] == 3
