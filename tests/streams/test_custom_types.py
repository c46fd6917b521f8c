"""Custom memory types through the running pipeline (scripted LLM): a declared type has its own
stage and consumer group, asks with its own prompt, records its prompt version, reconciles or
only adds as declared, is searched and laid out by `build_context` under its heading, accepts
direct saves checked against its fields, and a type added later back-fills from the log's
snapshots."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from pydantic import ValidationError

from memstream.config import Settings
from memstream.runtime.pipeline import StageProcess
from memstream.sdk.client import MemoryClient
from memstream.sdk.memory_types import UnknownMemoryType
from tests.memstream.cli.test_memories import memstream
from tests.support.custom_types import TUTOR
from tests.support.extraction_requests import asked
from tests.support.pipeline import PipelineHarness, eventually

pytestmark = pytest.mark.integration

PLANTS = "I think plants get their food from the soil. Also my charger is broken again."
SOIL = {
    "memories": [
        {
            "text": "The user believes plants get their food from the soil.",
            "topic": "photosynthesis",
            "severity": "major",
        }
    ]
}
CHARGER = {"memories": [{"text": "The user's charger is broken.", "product": "charger"}]}


def script(pipeline: PipelineHarness) -> None:
    pipeline.llm.on(asked("misconception", "plants get their food"), SOIL)
    pipeline.llm.on(asked("open_ticket", "charger is broken"), CHARGER)


def said(pipeline: PipelineHarness, user: str, session: str, text: str) -> None:
    pipeline.record(user, session, [{"role": "user", "content": text}])
    pipeline.flush(user, session)


def client_call(settings: Settings, call: Any) -> Any:
    async def run() -> Any:
        async with MemoryClient(settings) as client:
            return await call(client)

    return asyncio.run(run())


def test_a_declared_type_extracts_reconciles_searches_and_saves_as_declared(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(
        config=TUTOR, MEMSTREAM_ENABLED_EXTRACTIONS="misconception,open_ticket"
    )
    assert set(pipeline.pipeline.processes) >= {"extract:misconception", "extract:open_ticket"}
    script(pipeline)
    said(pipeline, "kai", "s1", PLANTS)
    memories = eventually(
        lambda: pipeline.memories(user_id="kai"), lambda m: len(m) == 2, what="two memories"
    )
    by_type = {m["memory_type"]: m for m in memories}
    soil = by_type["misconception"]
    assert soil["attributes"] == {"topic": "photosynthesis", "severity": "major"}
    assert by_type["open_ticket"]["attributes"] == {"product": "charger"}
    assert soil["provenance"]["prompt_version"].startswith("custom-1/misconception/")

    said(pipeline, "kai", "s2", PLANTS)  # said again: one type reconciles, the other only adds
    eventually(
        lambda: pipeline.snapshots(user_id="kai", session_id="s2"),
        lambda s: len(s) == 1 and len(s[0].get("extractions", {})) == 2,
        what="the second snapshot extracted by both types",
    )
    # the projector claims a result's slot before it expands the decisions: wait for them too
    memories = eventually(
        lambda: pipeline.memories(user_id="kai"),
        lambda m: (
            sum(x["memory_type"] == "open_ticket" for x in m) >= 2
            and any(x.get("reinforcement_count", 0) >= 1 for x in m)
        ),
        what="the second ticket added and the misconception reinforced",
    )
    assert sum(m["memory_type"] == "misconception" for m in memories) == 1
    assert sum(m["memory_type"] == "open_ticket" for m in memories) == 2
    (soil,) = [m for m in memories if m["memory_type"] == "misconception"]
    assert soil["reinforcement_count"] >= 1

    settings = pipeline.settings
    found = client_call(
        settings, lambda c: c.search("kai", "plants and soil", types=["misconception"])
    )
    assert [m["memory_type"] for m in found] == ["misconception"]
    block = client_call(settings, lambda c: c.build_context("kai", "what does kai get wrong?"))
    assert "## Misconceptions\n" in block
    assert "## Open ticket\n" in block  # no heading declared: from the name

    with pytest.raises(ValidationError, match="product"):
        client_call(settings, lambda c: c.save("kai", "open_ticket", "The user's fan is noisy."))
    with pytest.raises(UnknownMemoryType):
        client_call(settings, lambda c: c.save("kai", "tickets", "The user's fan is noisy."))
    pipeline.save("kai", "open_ticket", "The user's fan is noisy.", attributes={"product": "fan"})
    eventually(
        lambda: pipeline.memories(user_id="kai", memory_type="open_ticket"),
        lambda m: len(m) == 3,
        what="the saved ticket",
    )

    listed = memstream(pipeline, "memories", "--user", "kai", "--type", "misconception", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line)["memory_type"] for line in listed.stdout.splitlines()] == [
        "misconception"
    ]
    refused = memstream(pipeline, "memories", "--user", "kai", "--type", "tickets")
    assert refused.returncode == 2
    assert "unknown memory type 'tickets'" in refused.stderr


def test_a_type_added_later_back_fills_from_the_logs_snapshots(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory(
        config=TUTOR, MEMSTREAM_ENABLED_EXTRACTIONS="misconception"
    )
    assert "extract:open_ticket" not in pipeline.pipeline.processes
    script(pipeline)
    said(pipeline, "lea", "s1", PLANTS)
    eventually(
        lambda: pipeline.snapshots(user_id="lea"),
        lambda s: len(s) == 1 and set(s[0].get("extractions", {})) == {"misconception"},
        what="the snapshot extracted by the type enabled then",
    )
    environment = {
        **pipeline.pipeline.processes["extract:misconception"].environment,
        "MEMSTREAM_ENABLED_EXTRACTIONS": "misconception,open_ticket",
    }
    added = StageProcess("extract:open_ticket", environment, pipeline.log_dir)
    pipeline.pipeline.processes[added.stage] = added  # stopped with the pipeline
    added.start()
    pipeline.pipeline.wait_ready(stages=[added.stage])
    (ticket,) = eventually(
        lambda: pipeline.memories(user_id="lea", memory_type="open_ticket"),
        lambda m: len(m) == 1,
        what="the ticket of the snapshot promoted before its type was added",
    )
    assert ticket["attributes"] == {"product": "charger"}


def test_the_projector_refuses_a_read_model_holding_memories_of_an_undeclared_type(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(
        started=False, config=TUTOR, MEMSTREAM_ENABLED_EXTRACTIONS="misconception"
    )
    for memory_type in ("misconception", "homework", "semantic"):  # homework: declared no more
        pipeline.db["memories"].insert_one(
            {"memory_id": memory_type, "version": 1, "memory_type": memory_type, "user_id": "zed"}
        )
    worker = subprocess.run(
        [sys.executable, "-m", "memstream", "worker", "--stage", "projector"],
        env={**os.environ, **pipeline.environment},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worker.returncode == 2, worker.stderr
    assert "memory type 'homework', which the configuration does not declare" in worker.stderr
    assert "misconception" not in worker.stderr.split("declare it again")[0]
