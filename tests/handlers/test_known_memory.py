from __future__ import annotations

from handlers.known_memory import KnownMemory, evolve
from tests import factories as f


def known(text: str, *, memory_id: str) -> KnownMemory:
    return KnownMemory(
        memory_id=memory_id,
        version=1,
        content=f.content(text=text),
        embedding=(1.0, 0.0),
        embedding_model="scripted-embedding",
    )


def test_evolve_applies_an_update_once_and_ignores_what_it_knows_already() -> None:
    existing = known("The user lives in Lisbon.", memory_id="m1")
    update = f.memory_updated(memory_id="m1", embedding=(0.0, 1.0))
    once = evolve({"m1": existing}, [update])
    assert once["m1"].version == 2 and once["m1"].embedding == (0.0, 1.0)
    assert once["m1"].embedding_model == "scripted-embedding"
    assert evolve(once, [update, f.memory_added(memory_id="m1")]) == once


def test_evolve_merges_a_reinforcement_only_into_the_version_it_names() -> None:
    added = f.memory_added(memory_id="t1", memory_type="taxonomic")
    updated = f.memory_updated(memory_id="t1", memory_type="taxonomic")
    stale = f.memory_reinforced(memory_id="t1", version=1, merged_attributes={"aliases": ["X"]})
    current = f.memory_reinforced(memory_id="t1", version=2, merged_attributes={"aliases": ["AK"]})
    after = evolve({}, [added, updated, stale, current])
    assert after["t1"].version == 2
    assert after["t1"].content.attributes["aliases"] == ["AK"]


def test_evolve_ignores_a_reinforcement_of_a_memory_it_does_not_know() -> None:
    assert evolve({}, [f.memory_reinforced(memory_id="gone", merged_attributes={"a": [1]})]) == {}
