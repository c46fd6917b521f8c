"""Custom memory types in the configuration: declared, enabled, refused with the field named."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstream.config import ConfigError, extractor_identity, load_settings
from tests.support.custom_types import TUTOR as TYPES

TUTOR = TYPES + "  extraction:\n    enabled: [semantic, misconception, open_ticket]\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "project-config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path, **environ: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ)
    return str(info.value)


def test_declared_types_load_after_the_built_in_ones_and_can_be_enabled(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, TUTOR), {})
    memory = settings.memory
    assert memory.types == (
        "semantic",
        "episodic",
        "procedural",
        "taxonomic",
        "misconception",
        "open_ticket",
    )
    assert memory.extraction.enabled == ("semantic", "misconception", "open_ticket")
    assert memory.custom_types["misconception"].fields["topic"].required
    assert not memory.custom_types["open_ticket"].reconcile


def test_the_environment_may_enable_a_declared_type(tmp_path: Path) -> None:
    settings = load_settings(
        write(tmp_path, TUTOR), {"MEMSTREAM_ENABLED_EXTRACTIONS": "open_ticket"}
    )
    assert settings.memory.extraction.enabled == ("open_ticket",)


def test_an_undeclared_type_is_refused_naming_the_setting_and_the_variable(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, TUTOR), MEMSTREAM_ENABLED_EXTRACTIONS="semantic,tickets")
    assert "memory.extraction.enabled" in message
    assert "MEMSTREAM_ENABLED_EXTRACTIONS" in message
    assert "'tickets'" in message
    assert "misconception, open_ticket" in message  # the known ones, custom types included


def test_retention_of_an_undeclared_type_is_refused(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, TUTOR), MEMSTREAM_RETENTION="tickets=60")
    assert "memory.retention_seconds" in message
    assert "'tickets'" in message


@pytest.mark.parametrize(
    ("replace", "by", "named"),
    [
        ("    open_ticket:\n", "    semantic:\n", "is a built-in memory type"),
        ("    open_ticket:\n", "    Open-Ticket:\n", "memory.custom_types.Open-Ticket"),
        (
            "product: {type: string, required: true}",
            "product: {type: text}",
            "custom_types.open_ticket.fields.product.type",
        ),
        (
            "      reconcile: false\n",
            "      reconciles: false\n",
            "custom_types.open_ticket.reconciles",
        ),
        (
            "      instructions: Record each problem",
            "      instruction: Record each problem",
            "instructions",
        ),
    ],
)
def test_a_bad_declaration_is_refused_at_start_naming_the_field(
    tmp_path: Path, replace: str, by: str, named: str
) -> None:
    assert replace in TUTOR
    message = error_of(write(tmp_path, TUTOR.replace(replace, by, 1)))
    assert named in message


def test_more_than_five_custom_types_are_refused(tmp_path: Path) -> None:
    declared = "".join(f"    kind_{n}: {{description: d, instructions: i}}\n" for n in range(6))
    message = error_of(write(tmp_path, f"memory:\n  custom_types:\n{declared}"))
    assert "memory.custom_types" in message
    assert "at most 5" in message


def test_a_named_extractor_may_enable_a_declared_type_and_pin_its_prompt(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, TUTOR), {})
    version = extractor_identity(settings)  # the default extractor
    from handlers.extraction.custom import custom_prompt_version

    pinned = custom_prompt_version("misconception", settings.memory.custom_types["misconception"])
    text = (
        TUTOR
        + "extractor: tutor\nextractors:\n  tutor:\n    enabled: [misconception]\n"
        + f"    prompt_versions: {{misconception: {pinned}}}\n"
    )
    chosen = load_settings(write(tmp_path, text), {})
    assert chosen.memory.extraction.enabled == ("misconception",)
    assert extractor_identity(chosen).digest != version.digest


def test_an_extractor_naming_an_undeclared_type_is_refused(tmp_path: Path) -> None:
    text = TUTOR + "extractors:\n  v2:\n    enabled: [tickets]\n"
    message = error_of(write(tmp_path, text))
    assert "extractors.v2.enabled" in message
    assert "'tickets'" in message


def test_a_changed_declaration_changes_the_extractor_digest(tmp_path: Path) -> None:
    before = extractor_identity(load_settings(write(tmp_path, TUTOR), {}))
    edited = TUTOR.replace("with its topic.", "with its topic and how sure the student was.")
    after = extractor_identity(load_settings(write(tmp_path, edited), {}))
    assert before.name == after.name
    assert before.digest != after.digest
