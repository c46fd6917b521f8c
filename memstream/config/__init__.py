"""memstream's settings: `project-config.yaml`, then environment variables, validated up front.

`loading` reads them (its docstring lists every environment variable); `settings` is the whole
model and the extractor's identity; `sections` and `memory` are its parts.
"""

from memstream.config.loading import DEFAULT_CONFIG_FILE, ConfigError, load_settings
from memstream.config.memory import MemorySettings
from memstream.config.sections import (
    EmbeddingSettings,
    ExtractionSettings,
    HttpSettings,
    KafkaSettings,
    LimitsSettings,
    LLMSettings,
    MongoSettings,
    OperationsSettings,
    ReconcileSettings,
    SettingProblem,
    WindowSettings,
)
from memstream.config.settings import ExtractorIdentity, Settings, extractor_identity

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "ConfigError",
    "EmbeddingSettings",
    "ExtractionSettings",
    "ExtractorIdentity",
    "HttpSettings",
    "KafkaSettings",
    "LLMSettings",
    "LimitsSettings",
    "MemorySettings",
    "MongoSettings",
    "OperationsSettings",
    "ReconcileSettings",
    "SettingProblem",
    "Settings",
    "WindowSettings",
    "extractor_identity",
    "load_settings",
]
