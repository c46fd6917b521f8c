"""Scoring answers as the LoCoMo paper does (token F1) and as mem0's paper does (the J metric).

**F1** (`locomo_f1`), after the LoCoMo evaluation code (snap-research/locomo,
`task_eval/evaluation.py`, `eval_question_answering`):

- normalisation: commas removed, lower case, punctuation removed, the articles *a*, *an*,
  *the* and the word *and* removed, whitespace collapsed; each token Porter-stemmed (NLTK's
  `PorterStemmer`, as there);
- F1 over the multiset of tokens (precision and recall of the common tokens);
- category 1 (multi-hop): the gold answer and the prediction are split at commas, and the score
  is the mean, over the gold parts, of the best F1 of any predicted part;
- category 3 (open-domain): only the gold answer's text before the first ``;`` counts;
- categories 2 and 4: plain F1; category 5 (adversarial) is not scored (the papers report
  categories 1 to 4).

**mem0's F1** (`mem0_f1`, kept beside it for comparison with mem0's tables,
mem0ai/mem0 `evaluation/metrics/utils.py`): lower case, ``. , ! ?`` turned into spaces, the
*sets* of tokens compared, no stemming and no article removal, for every category alike.

**J** (`judge_label`): the answer LLM's reply is judged CORRECT or WRONG against the gold answer
by a judge LLM with mem0's prompt shape (`bench.locomo.answering.JUDGE_PROMPT`); J is the share
labelled CORRECT.
"""

from __future__ import annotations

import json
import re
import statistics
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from nltk.stem import PorterStemmer

from bench.locomo.dataset import ADVERSARIAL, CATEGORIES, QA, SCORED_CATEGORIES

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_STEMMER = PorterStemmer()


def normalize_answer(text: str) -> str:
    """LoCoMo's normalisation: no commas, lower case, no punctuation, no a/an/the/and."""
    text = text.replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


@lru_cache(maxsize=4096)
def _stem(word: str) -> str:
    return str(_STEMMER.stem(word))


def answer_tokens(text: str) -> list[str]:
    """The normalised, stemmed tokens F1 compares."""
    return [_stem(word) for word in normalize_answer(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    """F1 of the common tokens (as multisets) of the prediction and the gold answer."""
    predicted, expected = answer_tokens(prediction), answer_tokens(gold)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def multi_hop_f1(prediction: str, gold: str) -> float:
    """Mean over the gold answer's comma-separated parts of the best F1 of any predicted part."""
    predicted = [part.strip() for part in prediction.split(",")]
    expected = [part.strip() for part in gold.split(",")]
    return statistics.fmean(max(token_f1(p, g) for p in predicted) for g in expected)


def scored_gold(qa: QA) -> str:
    """The gold answer as LoCoMo scores it (open-domain: the text before the first ``;``)."""
    return qa.answer.split(";")[0].strip() if qa.category == 3 else qa.answer


def locomo_f1(prediction: str, qa: QA) -> float:
    """LoCoMo's F1 for one answer; `ValueError` for an adversarial question (not scored)."""
    if qa.category == ADVERSARIAL:
        raise ValueError("adversarial questions are not scored")
    if qa.category == 1:
        return multi_hop_f1(prediction, qa.answer)
    return token_f1(prediction, scored_gold(qa))


def _mem0_tokens(text: str) -> set[str]:
    for mark in ".,!?":
        text = text.replace(mark, " ")
    return set(text.lower().split())


def mem0_f1(prediction: str, gold: str) -> float:
    """mem0's evaluation F1: token *sets*, lower case, ``.,!?`` as spaces, nothing else."""
    predicted, expected = _mem0_tokens(prediction), _mem0_tokens(gold)
    common = len(predicted & expected)
    if not predicted or not expected or common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def scored(questions: Iterable[QA]) -> list[QA]:
    """The questions the papers score: every category but the adversarial one."""
    return [qa for qa in questions if qa.category in SCORED_CATEGORIES]


_LABEL = re.compile(r"\b(CORRECT|WRONG)\b")


def judge_label(reply: str) -> bool | None:
    """The judge's verdict: True for CORRECT, False for WRONG, None if it gave neither or both.

    The reply is JSON ``{"label": "CORRECT"}`` (mem0's shape); a plain-text reply naming exactly
    one of the two labels is accepted too.
    """
    text = reply.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("label"), str):
        label = data["label"].strip().upper()
        return {"CORRECT": True, "WRONG": False}.get(label)
    found = set(_LABEL.findall(reply.upper()))
    if len(found) == 1:
        return found == {"CORRECT"}
    return None


@dataclass(frozen=True)
class Scored:
    """One answered question's scores."""

    category: int
    f1: float
    mem0_f1: float
    judged: bool | None = None
    """The judge's label (None: no judge configured, or no usable label)."""


def summarize(rows: Sequence[Scored]) -> dict[str, Any]:
    """Per category (by name, in the order 1 to 4) and overall: count, mean F1, mean mem0 F1, J
    (the share judged CORRECT among the questions the judge labelled) and how many were
    labelled. Overall means are over questions, as the papers compute them."""

    def block(chosen: Sequence[Scored]) -> dict[str, Any]:
        labels = [row.judged for row in chosen if row.judged is not None]
        return {
            "questions": len(chosen),
            "f1": statistics.fmean(row.f1 for row in chosen) if chosen else None,
            "mem0_f1": statistics.fmean(row.mem0_f1 for row in chosen) if chosen else None,
            "j": statistics.fmean(1.0 if label else 0.0 for label in labels) if labels else None,
            "judged": len(labels),
        }

    summary: dict[str, Any] = {}
    for category in SCORED_CATEGORIES:
        chosen = [row for row in rows if row.category == category]
        if chosen:
            summary[CATEGORIES[category]] = block(chosen)
    summary["overall"] = block(list(rows))
    return summary
