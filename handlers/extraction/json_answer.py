"""Reading an LLM's JSON answer strictly: one object, the expected list inside it."""

from __future__ import annotations

from typing import Any

import orjson

from handlers.extraction.base import InvalidExtraction


def load_object(answer: str) -> dict[str, Any]:
    """Parse the answer as one JSON object (a ```json fence around it is tolerated)."""
    text = answer.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[4:].strip() if text[:4].casefold() == "json" else text.strip()
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidExtraction(f"not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise InvalidExtraction(f"expected a JSON object, got {type(value).__name__}")
    return value


def items_under(answer: str, key: str) -> list[dict[str, Any]]:
    """The list of objects under `key` (missing key or `null` means no items)."""
    value = load_object(answer).get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidExtraction(f'"{key}" must be a list, got {type(value).__name__}')
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise InvalidExtraction(f'"{key}"[{index}] must be an object')
    return value
