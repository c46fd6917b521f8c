"""The registry: one fresh extractor per memory type, all four types covered."""

from __future__ import annotations

from typing import Any

import pytest

from events.memories import MEMORY_TYPES, MemoryType
from handlers.extraction.episodic import EpisodicExtractor
from handlers.extraction.procedural import ProceduralExtractor
from handlers.extraction.registry import EXTRACTORS, UnsupportedMemoryType, extractor_for
from handlers.extraction.semantic import SemanticExtractor
from handlers.extraction.taxonomic import TaxonomicExtractor


def test_every_memory_type_has_an_extractor() -> None:
    assert set(EXTRACTORS) == set(MEMORY_TYPES)


@pytest.mark.parametrize(
    ("memory_type", "cls"),
    [
        ("semantic", SemanticExtractor),
        ("episodic", EpisodicExtractor),
        ("procedural", ProceduralExtractor),
        ("taxonomic", TaxonomicExtractor),
    ],
)
def test_registry_gives_a_fresh_extractor_of_the_type(memory_type: MemoryType, cls: Any) -> None:
    first = extractor_for(memory_type)
    assert isinstance(first, cls)
    assert first.memory_type == memory_type
    assert extractor_for(memory_type) is not first


def test_an_unknown_type_is_refused_with_the_available_ones() -> None:
    with pytest.raises(UnsupportedMemoryType) as info:
        extractor_for("emotional")
    assert "emotional" in str(info.value)
    assert "available: semantic, episodic, procedural, taxonomic" in str(info.value)


@pytest.mark.parametrize("memory_type", MEMORY_TYPES)
def test_each_system_prompt_begins_as_the_scripted_llm_tells_them_apart(
    memory_type: MemoryType,
) -> None:
    from tests.factories import snapshot
    from tests.support.extraction_requests import OPENINGS

    system = extractor_for(memory_type).prompt(snapshot())[0]["content"]
    assert system.startswith(OPENINGS[memory_type])
