"""Named extractor configurations: `extractors:` in `project-config.yaml`, one chosen by
`extractor:` (or `MEMSTREAM_EXTRACTOR`).

An extractor is everything that decides what memories a snapshot becomes: the LLM (model,
endpoint, temperature, answer length), the memory types extracted, the prompt version of each,
how many turns one call reads, and reconciliation's thresholds. Naming it lets a memory's
provenance say which configuration produced it (`events.memories.Provenance.extractor`, with a
digest of what the name meant then), and lets a project keep two side by side
(docs/architecture.md, "Extractors")::

    extractor: v2
    extractors:
      v1: {}                       # the top-level settings as they are
      v2:
        llm_model: qwen2.5-7b-instruct
        temperature: 0.0
        enabled: [semantic, episodic]
        prompt_versions: {semantic: semantic-5}
        reconcile: {ask_threshold: 0.9}

The chosen extractor's fields replace the top-level settings they name (`llm.model`,
`llm.base_url`, `llm.local` (`local_model`), `llm.temperature`, `llm.max_tokens`,
`memory.extraction.enabled`, `memory.reconcile.*`, `limits.extraction_turns_per_call`), whether
those came from the file or the environment. `prompt_versions` pins: the code has one prompt per
type, and an extractor that names another version is refused at start (the prompt it was
measured with is gone).

This module only reads the declarations (:func:`apply_extractor`, on the raw settings before
they are validated); `memstream.config.extractor_identity` names the result.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from events.memories import MEMORY_TYPES

__all__ = [
    "DEFAULT_EXTRACTOR",
    "ExtractorSettings",
    "apply_extractor",
    "extractor_digest",
    "memory_types_named",
]

DEFAULT_EXTRACTOR = "default"
"""The extractor's name when none is chosen: the top-level settings as they are."""

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class ExtractorSettings(BaseModel):
    """One named extractor: what it changes of the top-level settings (unset: unchanged)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    llm_model: str | None = Field(default=None, min_length=1, max_length=200)
    llm_base_url: str | None = Field(default=None, min_length=1)
    local_model: Literal["small", "large"] | None = None
    """With no endpoint configured: the packaged local model this extractor runs (`llm.local`),
    e.g. the 0.5B model (`small`) beside the 1.5B one (`large`)."""
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_answer_tokens: int | None = Field(default=None, ge=16, le=32_768)
    enabled: tuple[str, ...] | None = None
    """The memory types extracted (a list, or a comma-separated string)."""
    prompt_versions: dict[str, str] = Field(default_factory=dict)
    """Per memory type, the prompt version this extractor was made with (a pin, see above)."""
    turns_per_call: int | None = Field(default=None, ge=2, le=1_000)
    reconcile: dict[str, Any] = Field(default_factory=dict)
    """Fields of `memory.reconcile` (checked there, when this extractor is the chosen one)."""

    @field_validator("enabled", mode="before")
    @classmethod
    def _known_types(cls, value: Any) -> Any:
        return memory_types_named(value)

    def overrides(self) -> list[tuple[tuple[str, ...], Any]]:
        """(setting path, value) for every field this extractor sets."""
        named: list[tuple[tuple[str, ...], Any]] = [
            (("llm", "model"), self.llm_model),
            (("llm", "base_url"), self.llm_base_url),
            (("llm", "local"), self.local_model),
            (("llm", "temperature"), self.temperature),
            (("llm", "max_tokens"), self.max_answer_tokens),
            (("memory", "extraction", "enabled"), self.enabled),
            (("limits", "extraction_turns_per_call"), self.turns_per_call),
        ]
        named += [(("memory", "reconcile", key), value) for key, value in self.reconcile.items()]
        return [(path, value) for path, value in named if value is not None]


def apply_extractor(
    raw: dict[str, Any], prompt_versions: Callable[[], Mapping[str, str]]
) -> dict[str, Any]:
    """`raw` settings with the chosen extractor's fields in place of the top-level ones.

    Every declared extractor is checked, not only the chosen one, so a mistake is found before
    a switch to it. `prompt_versions()` gives the code's (memory type -> version), asked only
    when a declaration pins one. Raises ValueError naming the field: an unknown extractor, a bad
    declaration, a pinned prompt the code no longer has.
    """
    name = str(raw.get("extractor") or DEFAULT_EXTRACTOR)
    declared = raw.get("extractors") or {}
    if not isinstance(declared, dict):
        raise ValueError(f"extractors must be a mapping of names, got {type(declared).__name__}")
    types = (*MEMORY_TYPES, *_custom_type_names(raw))
    extractors = {
        key: declaration(key, value, prompt_versions, types) for key, value in declared.items()
    }
    if name not in extractors and name != DEFAULT_EXTRACTOR:
        known = ", ".join(extractors) or "none"
        raise ValueError(f"extractor {name!r} is not declared under extractors (declared: {known})")
    result = copy.deepcopy(raw)
    result["extractor"] = name
    chosen = extractors.get(name)
    for path, value in chosen.overrides() if chosen is not None else []:
        node = result
        for part in path[:-1]:
            child = node.get(part)
            node[part] = child = dict(child) if isinstance(child, dict) else {}
            node = child
        node[path[-1]] = value
    return result


def _custom_type_names(raw: Mapping[str, Any]) -> list[str]:
    """The custom memory types `raw` declares (`memory.custom_types`), as named."""
    memory = raw.get("memory")
    declared = memory.get("custom_types") if isinstance(memory, dict) else None
    return [str(name) for name in declared] if isinstance(declared, dict) else []


def declaration(
    name: Any,
    value: Any,
    prompt_versions: Callable[[], Mapping[str, str]],
    known_types: Sequence[str] = MEMORY_TYPES,
) -> ExtractorSettings:
    """The extractor declared as `name: value`, checked (ValueError naming the field): its
    memory types among `known_types`, its pinned prompts the code's."""
    if not isinstance(name, str) or re.fullmatch(NAME_PATTERN, name) is None:
        raise ValueError(f"extractors: {name!r} is not a name (letters, digits, . _ -; up to 64)")
    try:
        extractor = ExtractorSettings.model_validate(value or {})
    except ValidationError as exc:
        problems = "; ".join(
            f"extractors.{name}.{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
        raise ValueError(problems) from None
    unknown = [kind for kind in extractor.enabled or () if kind not in known_types]
    if unknown:
        raise ValueError(
            f"extractors.{name}.enabled: unknown memory type {', '.join(map(repr, unknown))}; "
            f"the memory types are {', '.join(known_types)}"
        )
    code = prompt_versions() if extractor.prompt_versions else {}
    for memory_type, version in extractor.prompt_versions.items():
        if memory_type not in code:
            known = ", ".join(code)
            raise ValueError(
                f"extractors.{name}.prompt_versions: unknown memory type {memory_type!r} "
                f"(the memory types are {known})"
            )
        if version != code[memory_type]:
            raise ValueError(
                f"extractors.{name}.prompt_versions.{memory_type}: {version!r} is not this "
                f"code's prompt ({code[memory_type]!r}); an extractor cannot run a "
                "prompt the code no longer has"
            )
    return extractor


def memory_types_named(value: Any) -> Any:
    """A list of memory types as settings give it (a list, or a comma-separated string); which
    names are known is checked where the custom types are known too (`MemorySettings`,
    `declaration`). Other values are left to the field's own validation."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


DIGEST_CHARS = 12


def extractor_digest(decides: Mapping[str, Any]) -> str:
    """A short stable digest of what an extractor decides with (JSON with sorted keys, SHA-256)."""
    text = json.dumps(decides, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]
