"""All of memstream's settings in one model, and the identity of the extractor they name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from handlers.extraction.custom import CustomTypeDeclaration
from memstream.config.memory import MemorySettings
from memstream.config.sections import (
    EmbeddingSettings,
    HttpSettings,
    KafkaSettings,
    LimitsSettings,
    LLMSettings,
    MongoSettings,
    OperationsSettings,
    Section,
    WindowSettings,
)
from memstream.extractors import (
    DEFAULT_EXTRACTOR,
    ExtractorSettings,
    apply_extractor,
    extractor_digest,
)


class Settings(Section):
    """All of memstream's settings."""

    kafka: KafkaSettings = KafkaSettings()
    mongodb: MongoSettings = MongoSettings()
    llm: LLMSettings = LLMSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    window: WindowSettings = WindowSettings()
    memory: MemorySettings = MemorySettings()
    limits: LimitsSettings = LimitsSettings()
    http: HttpSettings = HttpSettings()
    operations: OperationsSettings = OperationsSettings()
    data_dir: Path = Path(".memstream")
    extractor: str = DEFAULT_EXTRACTOR
    """The named extractor in use (`memstream.extractors`); its fields are applied above."""
    extractors: dict[str, ExtractorSettings] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _apply_extractor(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        return apply_extractor(raw, lambda: _prompt_versions(raw))


def _prompt_versions(raw: Mapping[str, Any]) -> dict[str, str]:
    """The code's prompt version per memory type, and each well-formed custom declaration's in
    `raw` (imports the extractors: asked only to check a pin, so a window worker's settings do
    not load them). A bad declaration is left out here: its own validation names the problem."""
    from handlers.extraction.custom import custom_prompt_version
    from handlers.extraction.registry import EXTRACTORS

    versions = {name: make().prompt_version for name, make in EXTRACTORS.items()}
    memory = raw.get("memory")
    declared = memory.get("custom_types") if isinstance(memory, dict) else None
    for name, value in (declared if isinstance(declared, dict) else {}).items():
        try:
            declaration = CustomTypeDeclaration.model_validate(value)
        except ValidationError:
            continue
        versions[str(name)] = custom_prompt_version(str(name), declaration)
    return versions


@dataclass(frozen=True)
class ExtractorIdentity:
    """What a memory's provenance records of the extractor that produced it."""

    name: str
    digest: str
    """Of everything the name stood for when it ran (`memstream.extractors.extractor_digest`)."""


def extractor_identity(settings: Settings) -> ExtractorIdentity:
    """The extractor in use: its name, and a digest of the settings it decides with (not of
    addresses or keys: the same extractor on another endpoint is the same extractor)."""
    from handlers import consolidation_prompt
    from handlers.extraction.registry import extractor_for
    from handlers.reconcile_prompt import BATCH_PROMPT_VERSION, PROMPT_VERSION

    reconcile = settings.memory.reconcile
    enabled = settings.memory.extraction.enabled
    decides = {
        "llm_model": settings.llm.model,
        "temperature": settings.llm.temperature,
        "max_answer_tokens": settings.llm.max_tokens,
        "prompt_versions": {
            name: extractor_for(name, settings.memory.custom_types).prompt_version
            for name in enabled
        },
        "turns_per_call": settings.limits.extraction_turns_per_call,
        "max_memories_per_extraction": settings.limits.max_memories_per_extraction,
        "reconcile": reconcile.model_dump(mode="json"),
        "reconcile_prompt": PROMPT_VERSION
        if reconcile.questions_per_call == 1
        else BATCH_PROMPT_VERSION,
        "consolidate_prompt": consolidation_prompt.PROMPT_VERSION,
    }
    return ExtractorIdentity(settings.extractor, extractor_digest(decides))
