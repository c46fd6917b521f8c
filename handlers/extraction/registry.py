"""Which extractor handles which memory type."""

from __future__ import annotations

from events.memories import MemoryType
from handlers.extraction.base import Extractor
from handlers.extraction.semantic import SemanticExtractor

EXTRACTORS: dict[MemoryType, type[SemanticExtractor]] = {"semantic": SemanticExtractor}
"""Memory types with an automatic extractor in this version (the others can still be saved)."""


class UnsupportedMemoryType(ValueError):
    """No automatic extractor exists for this memory type yet."""


def extractor_for(memory_type: MemoryType) -> Extractor:
    """A fresh extractor for `memory_type`, or `UnsupportedMemoryType`."""
    try:
        return EXTRACTORS[memory_type]()
    except KeyError:
        available = ", ".join(EXTRACTORS)
        raise UnsupportedMemoryType(
            f"automatic {memory_type} extraction is not implemented yet (available: {available})"
        ) from None
