"""The memory section: custom types, extraction, reconciliation, retention and sealing."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from events.memories import MEMORY_TYPES, MemoryType
from handlers.extraction.custom import MAX_CUSTOM_TYPES, CustomTypeDeclaration
from memstream.config.sections import (
    ExtractionSettings,
    ReconcileSettings,
    Section,
    SettingProblem,
)


class MemorySettings(Section):
    custom_types: dict[MemoryType, CustomTypeDeclaration] = Field(
        default_factory=dict, max_length=MAX_CUSTOM_TYPES
    )
    """A project's own memory types (`handlers.extraction.custom`, docs/architecture.md,
    "Custom memory types"): each is extracted, reconciled, searched and forgotten like a
    built-in type once `extraction.enabled` names it."""
    extraction: ExtractionSettings = ExtractionSettings()
    reconcile: ReconcileSettings = ReconcileSettings()
    retention_seconds: dict[MemoryType, float] = Field(default_factory=dict)
    """How long a memory version of each type lives before it expires and is forgotten
    (docs/architecture.md, "Expiry"); a type not named lives for ever. In the environment:
    `MEMSTREAM_RETENTION="episodic=7776000,procedural=31536000"`."""
    expiry_check_interval_seconds: float = Field(default=60.0, gt=0)
    """How often each memory type's stage looks for versions that are due."""
    rerank_past_messages: bool = False
    """Whether `build_context` reranks the past messages its keywords found by their meaning's
    similarity to the query (docs/architecture.md, "Past messages"): more of a question's
    evidence recalled (0.74 against 0.70 of LoCoMo's evidence turns), but no better answers
    measured with the packaged model, and up to 21 texts embedded per call. In the
    environment: `MEMSTREAM_RERANK_PAST_MESSAGES=true`."""
    seal_content: bool = True
    """Whether memstream's writers (the SDK, the HTTP API, the window, the extraction stages)
    seal the content of what they write to the log with per-session, per-memory and per-user
    data keys kept in MongoDB, so forgetting can destroy the keys (docs/architecture.md,
    "Crypto-shredding"). Sealed content is read whatever this says."""
    master_key_file: Path | None = None
    """The master keys that wrap the data keys (`memstream.keystore.wrapping`: one base64 key per
    line, the first wraps): the database then holds no usable key material. Unset: the data
    directory's `master.key` when it exists (`memstream up` creates it), else data keys are
    stored unwrapped."""

    @field_validator("retention_seconds", mode="before")
    @classmethod
    def _pairs(cls, value: Any) -> Any:
        if isinstance(value, str):
            pairs = [part.strip() for part in value.split(",") if part.strip()]
            parsed: dict[str, str] = {}
            for pair in pairs:
                name, separator, seconds = pair.partition("=")
                if not separator:
                    raise ValueError(f"retention {pair!r} is not TYPE=SECONDS")
                parsed[name.strip()] = seconds.strip()
            return parsed
        return value

    @field_validator("retention_seconds")
    @classmethod
    def _positive(cls, value: dict[MemoryType, float]) -> dict[MemoryType, float]:
        for name, seconds in value.items():
            if seconds <= 0:
                raise ValueError(f"retention of {name} must be more than 0 seconds")
        return value

    @field_validator("custom_types")
    @classmethod
    def _own_names(
        cls, value: dict[MemoryType, CustomTypeDeclaration]
    ) -> dict[MemoryType, CustomTypeDeclaration]:
        for name in value:
            if name in MEMORY_TYPES:
                raise ValueError(
                    f"{name!r} is a built-in memory type: a custom type needs its own name"
                )
        return value

    @model_validator(mode="after")
    def _known_types(self) -> MemorySettings:
        named: list[tuple[tuple[str, ...], Sequence[str]]] = [
            (("memory", "extraction", "enabled"), self.extraction.enabled),
            (("memory", "retention_seconds"), list(self.retention_seconds)),
        ]
        for path, names in named:
            unknown = [name for name in names if name not in self.types]
            if unknown:
                raise SettingProblem(
                    path,
                    f"unknown memory type {', '.join(map(repr, unknown))}; the memory types are "
                    f"{', '.join(self.types)} (a custom type is declared under "
                    "memory.custom_types)",
                    unknown[0],
                )
        return self

    @property
    def types(self) -> tuple[MemoryType, ...]:
        """Every memory type: the built-in ones, then the declared custom ones."""
        return (*MEMORY_TYPES, *self.custom_types)
