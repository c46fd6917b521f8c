"""The settings of a verb that reads or writes the running pipeline's database."""

from __future__ import annotations

from memstream.config import Settings, load_settings


def settings_with_a_database() -> Settings:
    """The settings, or exit naming what is missing when no database is configured."""
    settings = load_settings()
    if not settings.mongodb.uri:
        raise SystemExit("memstream: MONGODB_URI is not set (is `memstream up` running?)")
    return settings
