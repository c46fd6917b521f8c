"""Named extractors (`memstream.extractors`, `memstream.config.extractor_identity`): the chosen
one's fields replace the top-level settings, every declaration is checked at start with the field
named, and the digest says what the name stood for."""

from __future__ import annotations

from pathlib import Path

import pytest

from handlers.extraction.semantic import SemanticExtractor
from memstream.config import ConfigError, Settings, extractor_identity, load_settings

TWO_EXTRACTORS = """\
llm: {model: small, base_url: "http://llm.test/v1", temperature: 0.0}
memory:
  extraction: {enabled: [semantic, episodic, procedural]}
  reconcile: {ask_threshold: 0.85}
extractors:
  v1: {}
  v2:
    llm_model: large
    temperature: 0.2
    max_answer_tokens: 2048
    enabled: [semantic]
    prompt_versions: {semantic: SEMANTIC_PROMPT}
    turns_per_call: 8
    reconcile: {ask_threshold: 0.9, questions_per_call: 2}
""".replace("SEMANTIC_PROMPT", SemanticExtractor.prompt_version)


def settings_from(tmp_path: Path, text: str, **environ: str) -> Settings:
    path = tmp_path / "project-config.yaml"
    path.write_text(text, encoding="utf-8")
    return load_settings(path, environ)


def error_from(tmp_path: Path, text: str, **environ: str) -> str:
    with pytest.raises(ConfigError) as info:
        settings_from(tmp_path, text, **environ)
    return str(info.value)


def test_without_a_choice_the_extractor_is_the_default_one_and_changes_nothing(
    tmp_path: Path,
) -> None:
    settings = settings_from(tmp_path, TWO_EXTRACTORS)
    assert settings.extractor == "default"
    assert (settings.llm.model, settings.llm.temperature) == ("small", 0.0)
    assert settings.memory.reconcile.ask_threshold == 0.85
    assert set(settings.extractors) == {"v1", "v2"}


def test_the_chosen_extractor_replaces_the_settings_it_names_and_keeps_the_others(
    tmp_path: Path,
) -> None:
    settings = settings_from(tmp_path, "extractor: v2\n" + TWO_EXTRACTORS)
    assert settings.extractor == "v2"
    assert (settings.llm.model, settings.llm.temperature, settings.llm.max_tokens) == (
        "large",
        0.2,
        2048,
    )
    assert settings.llm.base_url == "http://llm.test/v1"  # not named by v2: kept
    assert settings.memory.extraction.enabled == ("semantic",)
    assert settings.limits.extraction_turns_per_call == 8
    reconcile = settings.memory.reconcile
    assert (reconcile.ask_threshold, reconcile.questions_per_call) == (0.9, 2)
    assert reconcile.reinforce_threshold == Settings().memory.reconcile.reinforce_threshold


def test_the_environment_chooses_the_extractor_and_its_fields_win_over_the_environment(
    tmp_path: Path,
) -> None:
    settings = settings_from(
        tmp_path, TWO_EXTRACTORS, MEMSTREAM_EXTRACTOR="v2", MEMSTREAM_LLM_MODEL="from-env"
    )
    assert (settings.extractor, settings.llm.model) == ("v2", "large")
    v1 = settings_from(tmp_path, TWO_EXTRACTORS, MEMSTREAM_EXTRACTOR="v1")
    assert (v1.extractor, v1.llm.model) == ("v1", "small")


def test_an_extractor_not_declared_is_refused_naming_those_that_are(tmp_path: Path) -> None:
    message = error_from(tmp_path, TWO_EXTRACTORS, MEMSTREAM_EXTRACTOR="v3")
    assert "extractor 'v3' is not declared under extractors (declared: v1, v2)" in message


@pytest.mark.parametrize(
    ("declaration", "named"),
    [
        ("{temperature: 3}", "extractors.v9.temperature"),
        ("{llm: {model: x}}", "extractors.v9.llm"),
        ("{enabled: [semantic, dreams]}", "extractors.v9.enabled"),
        ("{prompt_versions: {semantic: semantic-0}}", "extractors.v9.prompt_versions.semantic"),
        ("{prompt_versions: {dreams: dreams-1}}", "extractors.v9.prompt_versions"),
        ("{reconcile: {ask_threshold: 2}}", "memory.reconcile.ask_threshold"),
        ("{turns_per_call: 1}", "extractors.v9.turns_per_call"),
    ],
)
def test_a_bad_declaration_is_refused_at_start_naming_the_field(
    tmp_path: Path, declaration: str, named: str
) -> None:
    text = TWO_EXTRACTORS + f"  v9: {declaration}\n"
    if "reconcile" in declaration:
        text = "extractor: v9\n" + text  # checked as `memory.reconcile` is, once chosen
    assert named in error_from(tmp_path, text)


def test_a_pinned_prompt_the_code_no_longer_has_says_which_one_it_has(tmp_path: Path) -> None:
    message = error_from(tmp_path, TWO_EXTRACTORS.replace(SemanticExtractor.prompt_version, "x-1"))
    assert f"'x-1' is not this code's prompt ('{SemanticExtractor.prompt_version}')" in message


def test_a_name_that_is_not_one_is_refused(tmp_path: Path) -> None:
    assert "is not a name" in error_from(tmp_path, TWO_EXTRACTORS + "  'v 2': {}\n")


def test_the_digest_follows_what_the_extractor_decides_with_not_where_it_runs(
    tmp_path: Path,
) -> None:
    v2 = settings_from(tmp_path, "extractor: v2\n" + TWO_EXTRACTORS)
    moved = settings_from(
        tmp_path, "extractor: v2\n" + TWO_EXTRACTORS, OPENAI_BASE_URL="http://elsewhere/v1"
    )
    edited = settings_from(
        tmp_path, "extractor: v2\n" + TWO_EXTRACTORS.replace("temperature: 0.2", "temperature: 0.3")
    )
    identity = extractor_identity(v2)
    assert identity.name == "v2" and len(identity.digest) == 12
    assert extractor_identity(moved) == identity
    assert extractor_identity(edited).name == "v2"
    assert extractor_identity(edited).digest != identity.digest
    assert extractor_identity(settings_from(tmp_path, TWO_EXTRACTORS)).digest != identity.digest


def test_settings_validated_again_keep_the_extractor_applied_once() -> None:
    settings = Settings.model_validate(
        {"extractor": "v2", "extractors": {"v2": {"llm_model": "large"}}}
    )
    again = Settings.model_validate(settings.model_dump())
    assert again == settings and again.llm.model == "large"
