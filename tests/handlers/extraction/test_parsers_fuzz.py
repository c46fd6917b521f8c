"""Fuzzing the extraction answer parsers: whatever the LLM answers, every extractor either
returns memories or raises `InvalidExtraction` (the reason its retry is told) — never anything
else, which would turn a garbage answer into a crashed record instead of a dead letter."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.memories import MEMORY_TYPES, MemoryContent
from handlers.extraction.base import InvalidExtraction
from handlers.extraction.episodic import EpisodeDraft
from handlers.extraction.procedural import ProcedureDraft
from handlers.extraction.registry import extractor_for
from handlers.extraction.semantic import FactDraft
from handlers.extraction.taxonomic import TermDraft
from tests.factories import snapshot, turn
from tests.support.fuzz import FUZZ, JSON, model_strategy

KEYS = {
    "semantic": "facts",
    "episodic": "episodes",
    "procedural": "procedures",
    "taxonomic": "terms",
}
DRAFTS = {
    "semantic": FactDraft,
    "episodic": EpisodeDraft,
    "procedural": ProcedureDraft,
    "taxonomic": TermDraft,
}
SNAPSHOT = snapshot(
    turns=[
        turn(name="Tim", content="I work at Stripe. Yesterday I ran a marathon in Berlin."),
        turn(role="assistant", content="To deploy: 1. build 2. test 3. ship. A CRDT is a type."),
        turn(role="assistant", name="John", content="我是护士，我住在柏林。"),
    ]
)


def parses_or_refuses(memory_type: str, answer: str) -> None:
    try:
        memories = extractor_for(memory_type).parse(answer, SNAPSHOT)  # type: ignore[arg-type]
    except InvalidExtraction:
        return
    assert all(isinstance(memory, MemoryContent) for memory in memories)


def answer_text(value: Any, fence: bool) -> str:
    text = orjson.dumps(value).decode()
    return f"```json\n{text}\n```" if fence else text


@pytest.mark.parametrize("memory_type", MEMORY_TYPES)
def test_any_text_is_parsed_or_refused(memory_type: str) -> None:
    @FUZZ
    @given(st.text(max_size=200) | JSON.map(lambda value: orjson.dumps(value).decode()))
    def check(answer: str) -> None:
        parses_or_refuses(memory_type, answer)

    check()


@pytest.mark.parametrize("memory_type", MEMORY_TYPES)
def test_answers_of_the_right_shape_with_any_items_are_parsed_or_refused(
    memory_type: str,
) -> None:
    draft = model_strategy(DRAFTS[memory_type]).map(lambda d: d.model_dump(mode="json"))
    mangled = st.tuples(draft, st.dictionaries(st.text(max_size=10), JSON, max_size=3)).map(
        lambda pair: {**pair[0], **pair[1]}
    )
    items = st.lists(st.one_of(draft, mangled, JSON), max_size=4)

    @FUZZ
    @given(items, st.booleans())
    def check(found: list[Any], fence: bool) -> None:
        parses_or_refuses(memory_type, answer_text({KEYS[memory_type]: found}, fence))

    check()
