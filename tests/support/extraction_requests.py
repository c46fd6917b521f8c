"""Telling the extraction stages' requests apart in the scripted LLM, and their empty answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

OPENINGS = {
    "semantic": "You extract facts",
    "episodic": "You write the episodes",
    "procedural": "You extract procedures",
    "taxonomic": "You extract terms",
}
"""How each type's system prompt (`handlers/extraction/<type>.py`) begins."""

EMPTY_ANSWERS: dict[str, dict[str, Any]] = {
    "semantic": {"facts": []},
    "episodic": {"episodes": []},
    "procedural": {"procedures": []},
    "taxonomic": {"terms": []},
}


def asked(memory_type: str, words: str) -> Callable[[str], bool]:
    """A matcher for `memory_type`'s extraction prompt about a conversation containing `words`
    (a custom type's prompt opens with its name: `handlers.extraction.custom.system_prompt`)."""
    opening = OPENINGS.get(memory_type, f'You extract "{memory_type}" memories')
    return lambda text: opening in text and words in text
