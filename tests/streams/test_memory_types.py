"""All four memory types through the running pipeline: each type's stage (its own consumer group)
reads every snapshot and asks the LLM with its own prompt; a taxonomic REINFORCE merges aliases.

The scripted LLM tells the stages apart by their system prompts (`handlers/extraction/*`).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.extraction_requests import EMPTY_ANSWERS, asked
from tests.support.pipeline import PipelineHarness, eventually

pytestmark = pytest.mark.integration

ALL_TYPES = "semantic,episodic,procedural,taxonomic"
FIRST = (
    "I work at Stripe. Yesterday I went hiking with my sister on Mount Tam. "
    "Always answer me in short bullet points. At work we call a total outage a P0."
)
SECOND = "Our on-call folks also say sev-zero for a P0, a total outage."

ANSWERS: dict[str, dict[str, Any]] = {
    "semantic": {
        "facts": [
            {
                "subject": "the user",
                "statement": "The user works at Stripe.",
                "owner": "user",
                "category": "basic_info",
                "profile_field": "employer",
            }
        ]
    },
    "episodic": {
        "episodes": [
            {
                "subject": "the user",
                "title": "Hiking on Mount Tam",
                "summary": "The user went hiking with their sister on Mount Tam.",
                "participants": ["the user"],
            }
        ]
    },
    "procedural": {
        "procedures": [
            {
                "kind": "rule",
                "trigger": "always",
                "steps": ["Answer in short bullet points"],
                "applies_to": "the user",
                "given_by": "the user",
            }
        ]
    },
    "taxonomic": {"terms": [{"term": "P0", "parent": "incident", "definition": "a total outage"}]},
}
P0_AGAIN = {
    "terms": [
        {
            "term": "P0",
            "parent": "incident",
            "definition": "a total outage",
            "aliases": ["sev-zero"],
        }
    ]
}


def script(pipeline: PipelineHarness) -> None:
    for memory_type, answer in ANSWERS.items():
        pipeline.llm.on(asked(memory_type, "Mount Tam"), answer)
    pipeline.llm.on(asked("taxonomic", "sev-zero"), P0_AGAIN)
    for memory_type in ("semantic", "episodic", "procedural"):
        pipeline.llm.on(asked(memory_type, "sev-zero"), EMPTY_ANSWERS[memory_type])


def said(pipeline: PipelineHarness, user: str, session: str, text: str) -> None:
    pipeline.record(user, session, [{"role": "user", "content": text}])
    pipeline.flush(user, session)


def test_every_enabled_type_extracts_its_own_memory_from_one_snapshot(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(MEMSTREAM_ENABLED_EXTRACTIONS=ALL_TYPES)
    script(pipeline)
    said(pipeline, "tia", "s1", FIRST)
    memories = eventually(
        lambda: pipeline.memories(user_id="tia"), lambda m: len(m) == 4, what="four memories"
    )
    by_type = {m["memory_type"]: m for m in memories}
    assert by_type["semantic"]["text"] == "The user works at Stripe."
    assert by_type["episodic"]["attributes"]["title"] == "Hiking on Mount Tam"
    assert by_type["procedural"]["text"] == "Always: Answer in short bullet points."
    assert by_type["taxonomic"]["attributes"]["term"] == "P0"
    (snapshot,) = pipeline.snapshots(user_id="tia")
    assert {m["evidence"][0]["snapshot_id"] for m in memories} == {snapshot["_id"]}
    systems = {r["messages"][0]["content"][:30] for r in pipeline.llm.chat_requests}
    assert len(systems) == 4  # one request per type, each with its own prompt


def test_a_term_used_again_with_a_new_alias_is_reinforced_and_merges_the_alias(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(MEMSTREAM_ENABLED_EXTRACTIONS=ALL_TYPES)
    script(pipeline)
    said(pipeline, "uma", "s1", FIRST)
    eventually(
        lambda: pipeline.memories(user_id="uma"), lambda m: len(m) == 4, what="four memories"
    )
    said(pipeline, "uma", "s2", SECOND)
    eventually(
        lambda: pipeline.snapshots(user_id="uma", session_id="s2"),
        lambda s: len(s) == 1 and len(s[0].get("extractions", {})) == 4,
        what="the second snapshot extracted by all four types",
    )
    (term,) = eventually(
        lambda: pipeline.memories(user_id="uma", memory_type="taxonomic"),
        lambda m: len(m) == 1 and m[0]["reinforcement_count"] == 1,
        what="the term reinforced",
    )
    assert term["attributes"]["aliases"] == ["sev-zero"]
    assert term["version"] == 1
    assert len(pipeline.memories(user_id="uma")) == 4  # the second snapshot added nothing else
