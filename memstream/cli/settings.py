"""The settings of a verb that reads or writes the running pipeline's database."""

from __future__ import annotations

from memstream.config import Settings, load_settings


def settings_with_a_database() -> Settings:
    """The settings, or exit naming what is missing when no database is configured."""
    settings = load_settings()
    if not settings.mongodb.uri:
        raise SystemExit("memstream: MONGODB_URI is not set (is `memstream up` running?)")
    return settings


def as_served(settings: Settings) -> Settings:
    """`settings` as the served lineage's readers see them (docs/architecture.md, "Promotion"):
    while a shadow is promoted, its database, consumer groups and results topics; otherwise,
    or with no database configured, `settings` themselves."""
    from memstream.promotion.lineage import ShadowRefused, served_settings
    from memstream.promotion.pointer import look_up_served

    if not settings.mongodb.uri:
        return settings
    try:
        return served_settings(settings, look_up_served(settings))
    except ShadowRefused as exc:
        raise SystemExit(f"memstream: the served read model: {exc}") from None


def live_and_shadow(name: str, extractor: str) -> tuple[Settings, dict[str, str]]:
    """The live settings (a database and a broker configured) and the environment that makes
    them the shadow NAME's (`memstream.runtime.shadow.shadow_environment`), or exit saying
    what is missing or refused."""
    from memstream.promotion.lineage import ShadowRefused, shadow_environment

    live = settings_with_a_database()
    if not live.kafka.bootstrap_servers:
        raise SystemExit(
            "memstream: KAFKA_BOOTSTRAP_SERVERS is not set (is `memstream up` running?)"
        )
    try:
        return live, shadow_environment(live, name, extractor)
    except ShadowRefused as exc:
        raise SystemExit(f"memstream: {exc}") from None
