"""A named extractor through the running pipeline (docs/architecture.md, "Extractors"): the stage
asks the LLM with the extractor's settings, and every memory it decides names the extractor and
what it stood for in its provenance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from handlers.extraction.semantic import SemanticExtractor
from memstream.config import extractor_identity
from tests.streams.test_reconciliation import THRESHOLDS, said, script_a_move_from_lisbon_to_porto
from tests.support.pipeline import PipelineHarness, eventually

pytestmark = pytest.mark.integration


def test_memories_decided_by_a_named_extractor_record_its_name_and_digest(
    pipeline_factory: Any, scripted_llm: Any, tmp_path: Path
) -> None:
    config = tmp_path / "extractors.yaml"
    config.write_text(
        "extractors:\n"
        "  v1: {}\n"
        "  careful:\n"
        f"    llm_model: {scripted_llm.model}\n"
        "    temperature: 0.3\n"
        f"    prompt_versions: {{semantic: {SemanticExtractor.prompt_version}}}\n",
        encoding="utf-8",
    )
    pipeline: PipelineHarness = pipeline_factory(
        MEMSTREAM_CONFIG=str(config), MEMSTREAM_EXTRACTOR="careful", **THRESHOLDS
    )
    identity = extractor_identity(pipeline.settings)
    assert identity.name == "careful"
    script_a_move_from_lisbon_to_porto(pipeline)
    said(pipeline, "ivy", "s1", "I live in Lisbon.")
    # Two sessions' turns are keyed apart (user|session), so their snapshots reach the
    # extractor in no set order: the second is said once the first is a memory.
    eventually(
        lambda: pipeline.memories(user_id="ivy"), lambda found: len(found) == 1, what="Lisbon"
    )
    said(pipeline, "ivy", "s2", "I moved to Porto.")

    events = eventually(
        lambda: list(pipeline.db["memory_events"].find({"user_id": "ivy"})),
        lambda found: {e["event_type"] for e in found} >= {"MemoryAdded", "MemoryUpdated"},
        what="the memory added from Lisbon and updated to Porto",
    )
    recorded = {
        (e["event"]["provenance"]["extractor"], e["event"]["provenance"]["extractor_digest"])
        for e in events
    }
    assert recorded == {("careful", identity.digest)}
    temperatures = {request.get("temperature") for request in pipeline.llm.chat_requests}
    assert temperatures == {0.3}  # extraction and the reconciliation question alike
    versions = pipeline.memories(user_id="ivy")
    assert all(v["provenance"]["extractor"] == "careful" for v in versions)
