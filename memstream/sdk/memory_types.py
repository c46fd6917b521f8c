"""Which memory types a client may name: the built-in ones and the project's declared custom
ones (`memory.custom_types`). A save or consolidation of an unknown type would wait for a stage
that does not run, so it is refused before anything is sent."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from events.memories import MemoryType
from handlers.extraction.custom import saved_attributes
from memstream.config import Settings


class UnknownMemoryType(ValueError):
    """The memory type is neither built in nor declared (nothing is sent)."""


def known_types(settings: Settings, names: Iterable[str]) -> tuple[MemoryType, ...]:
    """`names`, each once, or `UnknownMemoryType` naming the first unknown and the known ones."""
    known = settings.memory.types
    for name in names:
        if name not in known:
            raise UnknownMemoryType(
                f"unknown memory type {name!r}; the memory types are {', '.join(known)}"
            )
    return tuple(dict.fromkeys(names))


def attributes_for(
    settings: Settings, memory_type: MemoryType, attributes: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A direct save's attributes: a custom type's checked against its declared fields
    (`pydantic.ValidationError` naming the field), a built-in type's as given."""
    known_types(settings, [memory_type])
    declaration = settings.memory.custom_types.get(memory_type)
    if declaration is None:
        return dict(attributes or {})
    return saved_attributes(declaration, attributes or {})
