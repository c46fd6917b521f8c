"""What every extractor does with the items of an LLM answer before they become memories.

* `validated` checks one item against the extractor's pydantic draft schema and raises
  `InvalidExtraction` naming the item and the field (``"episodes"[0].title: Field required``),
  the reason `extract()` hands back to the LLM on its retry;
* `one_line` normalises the whitespace of a field the LLM wrote;
* `in_first_person` recognises a sentence that copies a message ("I work at …", "我在…")
  instead of stating something about someone: whose "I" it is cannot be known for sure;
* `support` measures how much of a text rests on what one participant said, and says when that
  cannot be judged by words (an English text about a Chinese conversation).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from handlers.attribution import evidence_terms, main_script
from handlers.extraction.base import InvalidExtraction
from handlers.rendering import CJK_IDEOGRAPHS

Draft = TypeVar("Draft", bound=BaseModel)


def validated(schema: type[Draft], item: dict[str, Any], key: str, index: int) -> Draft:
    """`item` (the `index`-th object under `key`) as a `schema` draft, or `InvalidExtraction`."""
    try:
        return schema.model_validate(item)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidExtraction(f'"{key}"[{index}].{where}: {first["msg"]}') from exc


def one_line(text: str) -> str:
    """The text with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(text.split())


_FIRST_PERSON = re.compile(
    r"(?<![\w'-])(I|I'm|I've|I'd|I'll)(?![\w'-])"
    r"|(?i:^(we|our)\b|\b(my|me|mine|myself)\b)|我"
)


def in_first_person(text: str) -> bool:
    """Whether the text speaks in the first person (an "I" inside a word such as "I-95" or
    "Imagine" does not count; "we"/"our" only at the start, where they open a copied message)."""
    return _FIRST_PERSON.search(text.replace("\u2019", "'")) is not None


_TRAILING_LINK = re.compile(
    r"(\s*[,;:\u3001\uff0c\uff1b]\s*|\s+)(and|but|so|because|since|as|which|it says|says|"
    r"then|or)?\s*$|[\s,;:\u3001\uff0c\uff1b\u4f46\u800c\u6240\u4ee5\u56e0\u4e3a]+$",
    re.IGNORECASE,
)
MIN_KEPT_WORDS = 4
_FULL_STOP = "\u3002"


def third_person_part(text: str) -> str | None:
    """What a sentence said before it turned to the first person, as a sentence of its own, or
    None when too little is left (fewer than `MIN_KEPT_WORDS` words; six characters of Chinese).

    Small models often open in the third person and then copy the rest of the message: "The
    user's router drops the wifi every evening and I have to restart it." keeps "The user's
    router drops the wifi every evening." Whose "I" the rest is cannot be known, so it is cut."""
    found = _FIRST_PERSON.search(text.replace("\u2019", "'"))
    if found is None:
        return text
    kept = _TRAILING_LINK.sub("", text[: found.start()]).strip()
    long_enough = len(kept.split()) >= MIN_KEPT_WORDS or len(_CJK.findall(kept)) >= 6
    if not long_enough or in_first_person(kept):
        return None
    if kept.endswith((".", _FULL_STOP)):
        return kept
    return kept + (_FULL_STOP if _CJK.search(kept) else ".")


def support(text: str, evidence: Iterable[str], *, names: Iterable[str]) -> float | None:
    """The share of `text`'s content terms that appear in `evidence` (0.0 to 1.0).

    None when the words cannot decide: the text has no content terms of its own, or it is
    written in another script than the evidence (small models often answer a Chinese
    conversation in English). `handlers.attribution.rests_on` counts those as resting.
    """
    names = list(names)
    claimed = evidence_terms(text, ignore=names)
    said: set[str] = set()
    for message in evidence:
        said |= evidence_terms(message, ignore=names)
    if not claimed or main_script(claimed) != main_script(said):
        return None
    return len(claimed & said) / len(claimed)


_CJK = re.compile(f"[{CJK_IDEOGRAPHS}]")
