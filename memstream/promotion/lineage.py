"""A lineage: the stages of one extractor and the read model they build. The live lineage runs
with the settings as configured; a shadow NAME's with a few of them changed
(`shadow_environment`; docs/architecture.md, "Re-extraction"). The served lineage is the live
one until a shadow is promoted (`served_environment`)."""

from __future__ import annotations

import re

from handlers.serving import Served
from memstream.config import Settings
from memstream.extractors import DEFAULT_EXTRACTOR

SHADOW_NAME = r"^[A-Za-z0-9_-]{1,40}$"
"""A shadow's name: its read model's database, a part of its topics' and groups' names."""


class ShadowRefused(ValueError):
    """The shadow cannot be made as asked (its name, its extractor); nothing was started."""


def shadow_environment(settings: Settings, name: str, extractor: str) -> dict[str, str]:
    """The environment that turns the live `settings` into the shadow NAME's: its extractor, its
    database, its consumer groups and results topics; the live data keys."""
    if re.fullmatch(SHADOW_NAME, name) is None:
        raise ShadowRefused(f"{name!r} is not a shadow name (letters, digits, _ and -; up to 40)")
    mongodb = settings.mongodb
    if name in (mongodb.database, mongodb.keys_database_name):
        raise ShadowRefused(
            f"{name!r} is the live deployment's database: a shadow needs a database of its own"
        )
    if extractor != DEFAULT_EXTRACTOR and extractor not in settings.extractors:
        declared = ", ".join(settings.extractors) or "none"
        raise ShadowRefused(
            f"extractor {extractor!r} is not declared under extractors (declared: {declared})"
        )
    kafka = settings.kafka
    return {
        "MEMSTREAM_EXTRACTOR": extractor,
        "MONGODB_DATABASE": name,
        "MEMSTREAM_KEYS_DATABASE": mongodb.keys_database_name,
        "MEMSTREAM_GROUP_PREFIX": f"{kafka.group_prefix}shadow.{name}.",
        "MEMSTREAM_RESULTS_TOPIC_PREFIX": f"{kafka.topic_prefix}shadow.{name}.",
    }


def served_environment(settings: Settings, served: Served) -> dict[str, str]:
    """The environment that turns the deployment's `settings` into the served lineage's: none
    while the live read model is served, the shadow's once one is promoted. A promoted
    shadow's extractor no longer declared is refused (`ShadowRefused`)."""
    if served.shadow is None or served.extractor is None:
        return {}
    return shadow_environment(settings, served.shadow, served.extractor)


def served_settings(settings: Settings, served: Served) -> Settings:
    """`settings` (the deployment's, as configured or built in code) as the served lineage's
    readers see them: the read model's database and the results topics. What `served_environment`
    gives the workers, applied to a settings object rather than read again from the environment
    (an SDK client's settings need not come from it)."""
    if served.shadow is None or served.extractor is None:
        return settings
    environment = shadow_environment(settings, served.shadow, served.extractor)
    mongodb = settings.mongodb.model_copy(
        update={
            "database": environment["MONGODB_DATABASE"],
            "keys_database": environment["MEMSTREAM_KEYS_DATABASE"],
        }
    )
    kafka = settings.kafka.model_copy(
        update={
            "group_prefix": environment["MEMSTREAM_GROUP_PREFIX"],
            "results_topic_prefix": environment["MEMSTREAM_RESULTS_TOPIC_PREFIX"],
        }
    )
    return settings.model_copy(update={"mongodb": mongodb, "kafka": kafka})


def deployment_database(settings: Settings) -> str:
    """The deployment's own database, where the served lineage is looked up: the live read
    model's (its data keys' when they are kept apart). A shadow's settings name the same one."""
    return settings.mongodb.keys_database_name
