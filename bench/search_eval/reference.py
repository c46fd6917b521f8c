"""Search by the definitions alone, to check the product's fast path and to try other fusions.

`reference_search` is `ReadModel.search` written the straightforward way: every document tested
with `Filters.matches`, every chosen text tokenised by `keyword_scores`, every candidate sorted
by `combine` — the definitions (`bench.search_eval.definitions`), in Python dicts. Only the
similarities come from the index (`UserIndex.vector_scores`, one matrix-vector product, which
the product does not change). The product (`UserIndex.search`: postings, masks,
`np.partition`) must return the same ids and the same floats; `run.py` and `tests/bench` check
it. `fusion`, `weight` and
`language_bias` rank another way (RRF, other weights, another or no correction of the
similarities for a shared language, `handlers.cross_lingual`) for the comparisons in RESULTS.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.search_eval.definitions import Fusion, combine, keyword_scores
from handlers.cross_lingual import corrected_similarities, language_of, same_language_bias
from handlers.rendering import Language
from handlers.search import VECTOR_WEIGHT, Filters, SearchMode
from memstream.sdk.search_index import UserIndex


@dataclass(frozen=True)
class Result:
    """What `ReadModel.search` adds to a memory's document, and the memory's id."""

    memory_id: str
    score: float
    vector_score: float | None
    keyword_score: float


def reference_search(
    index: UserIndex,
    query: str,
    vector: Sequence[float],
    model: str,
    *,
    mode: SearchMode,
    limit: int,
    filters: Filters | None = None,
    fusion: Fusion = "relative",
    weight: float = VECTOR_WEIGHT,
    language_bias: Mapping[Language, float] | None = None,
) -> list[Result]:
    """`ReadModel.search(...)` by the definitions (see the module docstring). `language_bias`
    replaces the model's `handlers.cross_lingual.LANGUAGE_BIAS` entry (`{}`: no correction)."""
    filters = filters or Filters()
    chosen = [p for p, document in enumerate(index.documents) if filters.matches(document)]
    ids = [str(index.documents[p].get("memory_id")) for p in chosen]
    texts = [str(index.documents[p].get("text") or "") for p in chosen]
    similarity, present = index.vector_scores(vector, model)
    cosines = {i: float(similarity[p]) for i, p in zip(ids, chosen, strict=True) if present[p]}
    language = language_of(query)
    bias = (
        same_language_bias(model, language)
        if language_bias is None
        else language_bias.get(language, 0.0)
    )
    languages = {i: language_of(text) for i, text in zip(ids, texts, strict=True)}
    vectors = corrected_similarities(cosines, languages, language, bias)
    keyword = dict(zip(ids, keyword_scores(query, texts), strict=True))
    return [
        Result(i, score, cosines.get(i), keyword.get(i, 0.0))
        for i, score in combine(mode, vectors, keyword, limit, fusion=fusion, weight=weight)
    ]
