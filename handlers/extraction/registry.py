"""Which extractor handles which memory type."""

from __future__ import annotations

from collections.abc import Callable

from events.memories import MemoryType
from handlers.extraction.base import Extractor
from handlers.extraction.episodic import EpisodicExtractor
from handlers.extraction.procedural import ProceduralExtractor
from handlers.extraction.semantic import SemanticExtractor
from handlers.extraction.taxonomic import TaxonomicExtractor

EXTRACTORS: dict[MemoryType, Callable[[], Extractor]] = {
    "semantic": SemanticExtractor,
    "episodic": EpisodicExtractor,
    "procedural": ProceduralExtractor,
    "taxonomic": TaxonomicExtractor,
}
"""Every memory type has an automatic extractor (each type can also be saved directly)."""


class UnsupportedMemoryType(ValueError):
    """No automatic extractor exists for this memory type."""


def extractor_for(memory_type: MemoryType) -> Extractor:
    """A fresh extractor for `memory_type`, or `UnsupportedMemoryType`."""
    try:
        return EXTRACTORS[memory_type]()
    except KeyError:
        available = ", ".join(EXTRACTORS)
        raise UnsupportedMemoryType(
            f"automatic {memory_type} extraction is not implemented yet (available: {available})"
        ) from None
