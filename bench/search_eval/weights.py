"""The hybrid's vector weight: every weight on the labelled set, and a held-out check.

`handlers.search.VECTOR_WEIGHT` was read off the same labelled set it is measured on, so its
score there flatters it. The held-out check separates choosing from measuring: for every way to
split the users in two halves (4 users: 6 splits of 2 and 2), the weight with the best MRR on
one half's queries (ties: the better recall@5, then the smaller weight) is scored on the other
half's queries, beside vector search alone, RRF and the product's weight on that same half. The
halves are users, not queries, so no user's memories and wording are seen on both sides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from bench.search_eval.dataset import LabelledSet
from bench.search_eval.quality import (
    RRF,
    QualityReport,
    QueryVectors,
    evaluate,
    reference_searcher,
)
from bench.search_eval.scoring import Scores
from handlers.search import VECTOR_WEIGHT
from memstream.sdk.search_index import UserIndex

WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0)
"""Vector weights tried (all reported, so the choice can be judged)."""


def weight_name(weight: float) -> str:
    return f"hybrid, vector weight {weight:g}"


def sweep(
    data: LabelledSet, indexes: dict[str, UserIndex], vectors: QueryVectors, model_name: str
) -> QualityReport:
    """Hybrid by the definitions at every weight of `WEIGHTS`."""
    searchers = {weight_name(w): reference_searcher(indexes, model_name, weight=w) for w in WEIGHTS}
    return evaluate(data, vectors, searchers)


def held_out(data: LabelledSet, weights: QualityReport, sdk: QualityReport) -> list[dict[str, Any]]:
    """One entry per split: the weight chosen on `train`, and the scores on `test`.

    `weights` is `sweep`'s report; `sdk` holds the rankers "vector" and `RRF`."""
    users = [user.user_id for user in data.users]
    half = len(users) // 2
    by_user = {u: {q.id for q in data.queries if q.user_id == u} for u in users}
    found = []
    for train in combinations(users, half):
        test = [u for u in users if u not in train]
        train_ids = set().union(*(by_user[u] for u in train))
        test_ids = set().union(*(by_user[u] for u in test))
        chosen = max(
            WEIGHTS,
            key=lambda w: (
                weights.scores(weight_name(w), train_ids).mrr,
                weights.scores(weight_name(w), train_ids).recall_at_5,
                -w,
            ),
        )
        found.append(
            {
                "train": list(train),
                "test": test,
                "chosen_weight": chosen,
                "train_mrr": weights.scores(weight_name(chosen), train_ids).mrr,
                "test_queries": len(test_ids),
                "test_scores": {
                    "chosen weight": _scores(weights.scores(weight_name(chosen), test_ids)),
                    f"weight {VECTOR_WEIGHT:g}": _scores(
                        weights.scores(weight_name(VECTOR_WEIGHT), test_ids)
                    ),
                    "vector": _scores(sdk.scores("vector", test_ids)),
                    RRF: _scores(sdk.scores(RRF, test_ids)),
                },
            }
        )
    return found


def sweep_json(
    weights: QualityReport, named_groups: Mapping[str, set[str]], shown: Sequence[str]
) -> list[dict[str, Any]]:
    """Per weight: recall@1, recall@5 and MRR in each of the `shown` groups."""
    return [
        {
            "weight": w,
            "scores": {g: _scores(weights.scores(weight_name(w), named_groups[g])) for g in shown},
        }
        for w in WEIGHTS
    ]


def _scores(found: Scores) -> dict[str, float]:
    return vars(found).copy()
