"""The embedding model's bias for a shared language: measured, checked on held-out users, scaled.

`handlers.cross_lingual.LANGUAGE_BIAS` takes off a memory's similarity to a query written in its
own language what the model adds for the shared language. Its figures come from `calibrated`:

* **calibrated** — from the memories alone (their stored vectors; no query, no label): for each
  memory of a store holding both languages, the mean cosine to the *other* memories of its
  language minus the mean cosine to the memories of the other language; per language, the mean
  over those memories, pooled over the users and per user.
* **held out** — for every split of the users in two halves, the bias calibrated on one half's
  memories ranks the other half's queries (hybrid, by the definitions), beside the product's
  figures and no correction, on those same queries.
* **scaled** — the product's figures times 0 (no correction) to 1.5, hybrid on every query: how
  sharp the optimum is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from bench.search_eval.dataset import LabelledSet
from bench.search_eval.quality import QueryVectors, evaluate, reference_searcher
from handlers.cross_lingual import LANGUAGE_BIAS, LANGUAGES
from handlers.rendering import Language
from memstream.sdk.search_index import UserIndex

SCALES = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
"""Multiples of the product's figures tried by `scaled`."""
SHOWN = ("all", "query in en", "query in zh", "cross-lingual", "same language")


def memory_gaps(index: UserIndex, model: str) -> dict[str, list[float]]:
    """Per language: each memory's mean cosine to the other memories of its language minus its
    mean cosine to the memories in another language (memories with both kinds of neighbour)."""
    if model not in index.matrices:
        return {}
    positions, matrix = index.matrices[model]
    vectors = matrix.astype(np.float64)
    languages = np.asarray(LANGUAGES)[index.languages[positions]]
    cosines = vectors @ vectors.T
    gaps: dict[str, list[float]] = {}
    for row, language in enumerate(languages):
        same = languages == language
        same[row] = False
        other = languages != language
        if same.any() and other.any():
            gap = float(cosines[row, same].mean() - cosines[row, other].mean())
            gaps.setdefault(str(language), []).append(gap)
    return gaps


def calibrated(
    indexes: Mapping[str, UserIndex], model: str, users: Sequence[str] | None = None
) -> dict[str, Any]:
    """The bias per language pooled over `users` (default: all), and per user."""
    pooled: dict[str, list[float]] = {}
    per_user: dict[str, dict[str, Any]] = {}
    for user in users if users is not None else list(indexes):
        gaps = memory_gaps(indexes[user], model)
        per_user[user] = {
            language: {"memories": len(values), "bias": float(np.mean(values))}
            for language, values in sorted(gaps.items())
        }
        for language, values in gaps.items():
            pooled.setdefault(language, []).extend(values)
    return {
        "bias": {language: float(np.mean(v)) for language, v in sorted(pooled.items())},
        "memories": {language: len(v) for language, v in sorted(pooled.items())},
        "per_user": per_user,
    }


def held_out(
    data: LabelledSet,
    indexes: Mapping[str, UserIndex],
    vectors: QueryVectors,
    model: str,
    named_groups: Mapping[str, set[str]],
) -> list[dict[str, Any]]:
    """One entry per split: the bias calibrated on `train`'s memories and, on `test`'s queries
    (all and cross-lingual), hybrid with it, with the product's figures and with none."""
    users = [user.user_id for user in data.users]
    by_user = {u: {q.id for q in data.queries if q.user_id == u} for u in users}
    cross = named_groups["cross-lingual"]
    found = []
    for train in combinations(users, len(users) // 2):
        test = [u for u in users if u not in train]
        bias = calibrated(indexes, model, train)["bias"]
        biases: dict[str, Mapping[Language, float]] = {
            "calibrated on train": bias,
            "product": LANGUAGE_BIAS.get(model, {}),
            "none": {},
        }
        report = evaluate(
            data,
            vectors,
            {
                name: reference_searcher(dict(indexes), model, language_bias=b)
                for name, b in biases.items()
            },
        )
        test_ids = set().union(*(by_user[u] for u in test))
        found.append(
            {
                "train": list(train),
                "test": test,
                "bias": bias,
                "test_queries": len(test_ids),
                "test_cross_lingual": len(test_ids & cross),
                "test_scores": {
                    name: {
                        "all": vars(report.scores(name, test_ids)).copy(),
                        "cross-lingual": vars(report.scores(name, test_ids & cross)).copy(),
                    }
                    for name in biases
                },
            }
        )
    return found


def scaled(
    data: LabelledSet,
    indexes: Mapping[str, UserIndex],
    vectors: QueryVectors,
    model: str,
    named_groups: Mapping[str, set[str]],
) -> list[dict[str, Any]]:
    """Hybrid at each multiple of `SCALES` of the product's bias, scored in the `SHOWN` groups."""
    product = LANGUAGE_BIAS.get(model, {})
    biases = {
        scale: {language: scale * value for language, value in product.items()} for scale in SCALES
    }
    report = evaluate(
        data,
        vectors,
        {
            f"{scale:g}": reference_searcher(dict(indexes), model, language_bias=bias)
            for scale, bias in biases.items()
        },
    )
    return [
        {
            "scale": scale,
            "bias": biases[scale],
            "scores": {
                group: vars(report.scores(f"{scale:g}", named_groups[group])).copy()
                for group in SHOWN
            },
        }
        for scale in SCALES
    ]
