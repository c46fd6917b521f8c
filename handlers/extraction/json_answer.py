"""Reading an LLM's JSON answer strictly: one object, the expected list inside it.

One leniency, for answers cut off by the completion's token limit (a small model repeating
itself until it runs out): the items completed before the cut are kept, the one being written
is dropped (docs/architecture.md, "Extraction").
"""

from __future__ import annotations

from typing import Any

import orjson
import pydantic_core

from handlers.extraction.base import InvalidExtraction


def _unfenced(answer: str) -> str:
    """The answer without a ```json fence around it (or the opening half of one)."""
    text = answer.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[4:].strip() if text[:4].casefold() == "json" else text.strip()
    return text


def load_object(answer: str) -> dict[str, Any]:
    """Parse the answer as one JSON object (a ```json fence around it is tolerated)."""
    try:
        value = orjson.loads(_unfenced(answer))
    except orjson.JSONDecodeError as exc:
        raise InvalidExtraction(f"not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise InvalidExtraction(f"expected a JSON object, got {type(value).__name__}")
    return value


def completed_before_cut(answer: str) -> dict[str, Any]:
    """What an answer cut off mid-way completed: its object read as JSON that stopped early,
    without the last item of the list it was writing (that item may be unfinished).

    Empty when the answer is not such a prefix (malformed before its end, or not an object).
    """
    try:
        value = pydantic_core.from_json(_unfenced(answer), allow_partial=True)
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    if value and isinstance(last := list(value)[-1], str) and isinstance(value[last], list):
        value[last] = value[last][:-1]
    return value


def items_under(answer: str, key: str) -> list[dict[str, Any]]:
    """The list of objects under `key` (missing key or `null` means no items).

    An answer that is not valid JSON but stopped short of its end after completing some items
    under `key` gives those items (`completed_before_cut`); otherwise it is invalid."""
    try:
        value = load_object(answer).get(key)
    except InvalidExtraction:
        value = completed_before_cut(answer).get(key)
        if not value or not isinstance(value, list):
            raise
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidExtraction(f'"{key}" must be a list, got {type(value).__name__}')
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise InvalidExtraction(f'"{key}"[{index}] must be an object')
    return value
