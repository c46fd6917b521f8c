"""Cross-lingual search: the similarity an embedding model adds for sharing a language, taken off.

A multilingual embedder places texts of one language nearer each other whatever they say. With
the local model (multilingual-e5-small, 4-bit) a Chinese memory is on average 0.090 more similar
to the other Chinese memories of its store than to its English ones, an English memory 0.024
more to the English ones, and a Chinese query scores Chinese memories about 0.09 above English
ones of the same relevance. So a Chinese query ranked Chinese memories about *other people*
above the user's own fact stored in English ("我对什么过敏?": 悦悦's and 刘婷's allergies first,
the user's shrimp allergy 24th), and cross-lingual recall@5 was 0.59 against 0.96 within one
language (bench/search_eval/RESULTS.md).

**The rule** (`corrected_similarities`): among candidates written in the query's language and
in another, those in the query's language have their cosine lowered by the model's bias for
that language (`LANGUAGE_BIAS`); every other similarity is left as it is. Languages are
`handlers.rendering.detect_language` of the query and of each memory's text (CJK ideographs
against Latin letters: "zh" or "en"). Ranking compares the corrected similarities — vector mode
ranks by them, hybrid fuses them (`handlers.search`) — while each result's `vector_score` stays
the plain cosine. Candidates all in one language are ranked exactly as before, and so are those
of a model without an entry (an OpenAI-compatible embedder: its bias has not been measured).

**The figures** are the model's, not a user's: measured on the labelled set's memories alone
(no query, no label; `bench/search_eval/language_bias.py`) — for each memory of a store in both
languages, its mean cosine to the other memories of its language minus its mean cosine to the
memories of the other language, averaged per language — 0.0898 (zh) and 0.0241 (en), between
0.080 and 0.096 (zh) and 0.020 and 0.028 (en) from one user to another. Calibrated on two users
and tested on the other two, and scaled from 0 to 1.5 times: RESULTS.md, "Language bias".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import get_args

import numpy as np
from numpy.typing import NDArray

from handlers.rendering import _CJK_IDEOGRAPH, Language, detect_language

LOCAL_MODEL = "multilingual-e5-small-q4"
"""`memstream.providers.local_embedder.MODEL_NAME` (handlers import nothing from memstream; a test
checks
that the two agree)."""

LANGUAGE_BIAS: Mapping[str, Mapping[Language, float]] = {
    LOCAL_MODEL: {"zh": 0.090, "en": 0.024},
}
"""Per embedding model, per language: how much more similar two texts of that language are than a
text of it and one of the other language (bench/search_eval/language_bias.py)."""


LANGUAGES: tuple[Language, ...] = get_args(Language)
"""Every language `language_of` tells, in a fixed order (an index's column holds positions)."""


def language_of(text: str) -> Language:
    """The language a memory or a query is taken to be written in: `detect_language` of the
    text alone, which is English without a CJK ideograph (checked first: 3.5x faster over the
    texts of an index, most of them without one)."""
    if not _CJK_IDEOGRAPH.search(text):
        return "en"
    return detect_language([text])


def same_language_bias(model: str, language: Language) -> float:
    """What `model` adds to the similarity of two texts both in `language` (0 when unmeasured)."""
    return LANGUAGE_BIAS.get(model, {}).get(language, 0.0)


def corrected_similarities(
    similarity: Mapping[str, float],
    languages: Mapping[str, Language],
    query_language: Language,
    bias: float,
) -> dict[str, float]:
    """Each candidate's cosine (`similarity`, by memory id) with `bias` taken off those written
    in `query_language` — when the candidates are in both that language and another; with nothing
    to compare across, nothing is changed."""
    same = {i for i in similarity if languages[i] == query_language}
    if not bias or not same or len(same) == len(similarity):
        return dict(similarity)
    return {i: cosine - bias if i in same else cosine for i, cosine in similarity.items()}


def corrected_array(
    similarity: NDArray[np.float64],
    with_vector: NDArray[np.bool_],
    same_language: NDArray[np.bool_],
    bias: float,
) -> NDArray[np.float64]:
    """`corrected_similarities` by position: the candidates are `with_vector`, those in the
    query's language `same_language` (the same float subtraction, so the same floats)."""
    same = with_vector & same_language
    if not bias or not same.any() or not (with_vector & ~same_language).any():
        return similarity
    corrected: NDArray[np.float64] = np.where(same, similarity - bias, similarity)
    return corrected
