"""Which extractor handles which memory type: the built-in ones, and the custom types a project
declares (`handlers.extraction.custom`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from events.memories import MemoryType
from handlers.extraction.base import Extractor
from handlers.extraction.custom import CustomExtractor, CustomTypeDeclaration
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
"""Every built-in memory type has an automatic extractor (each type can also be saved directly)."""


class UnsupportedMemoryType(ValueError):
    """No automatic extractor exists for this memory type."""


def extractor_for(
    memory_type: MemoryType, custom_types: Mapping[str, CustomTypeDeclaration] | None = None
) -> Extractor:
    """A fresh extractor for `memory_type` — a built-in one, or the declared custom type's —
    or `UnsupportedMemoryType`."""
    declared = custom_types or {}
    if memory_type in declared:
        return CustomExtractor(memory_type, declared[memory_type])
    try:
        return EXTRACTORS[memory_type]()
    except KeyError:
        available = ", ".join([*EXTRACTORS, *declared])
        raise UnsupportedMemoryType(
            f"no extractor for the memory type {memory_type!r} (available: {available})"
        ) from None
