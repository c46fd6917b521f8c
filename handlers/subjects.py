"""Who a memory is about: when two memories have the same subject, and what a restated
taxonomic term adds to the one it restates (docs/architecture.md, "Reconciliation").

Subjects are compared case and spacing aside; a taxonomic term is also known by its aliases,
so "PR" and a term "pull request" that lists it are one subject.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from events.memories import MemoryContent, MemoryType


def same_subject(memory_type: MemoryType, known: MemoryContent, new: MemoryContent) -> bool:
    """Whether two memories are about the same subject (case and spacing aside). A taxonomic
    term is also the same subject as a term that lists it among its aliases."""
    names, new_names = {subject_key(known.subject)}, {subject_key(new.subject)}
    if memory_type == "taxonomic":
        names |= {subject_key(alias) for alias in _aliases(known.attributes)}
        new_names |= {subject_key(alias) for alias in _aliases(new.attributes)}
    return bool(names & new_names)


def merged_attributes(
    memory_type: MemoryType, known: MemoryContent, new: MemoryContent
) -> dict[str, Any]:
    """What a REINFORCE merges into the known memory's attributes: for a taxonomic term, the
    aliases and examples it did not list yet (kept in order; never the term itself); nothing
    for the other types."""
    if memory_type != "taxonomic":
        return {}
    merged: dict[str, Any] = {}
    for name in ("aliases", "examples"):
        have = [str(value) for value in known.attributes.get(name) or []]
        seen = {subject_key(value) for value in have} | (
            {subject_key(known.subject)} if name == "aliases" else set()
        )
        extra = [
            str(value)
            for value in new.attributes.get(name) or []
            if subject_key(str(value)) not in seen
        ]
        if extra:
            merged[name] = have + list(dict.fromkeys(extra))
    return merged


def _aliases(attributes: Mapping[str, Any]) -> list[str]:
    aliases = attributes.get("aliases") or []
    return [str(alias) for alias in aliases] if isinstance(aliases, list | tuple) else []


def subject_key(text: str) -> str:
    """A name as subjects are compared: case and spacing aside."""
    return " ".join(str(text).casefold().split())
