"""A memory that learns, through the running pipeline: UPDATE, REINFORCE, scopes, direct saves.

The scripted LLM's embeddings are hashed bags of words: "The user lives in Lisbon." and "The user
lives in Porto." share four words of five (cosine about 0.8), so the tests set the thresholds
for that space: 0.97 to reinforce without asking, 0.5 to ask.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from handlers.extraction.semantic import SemanticExtractor
from tests.support.pipeline import PipelineHarness, eventually

pytestmark = pytest.mark.integration

THRESHOLDS = {"MEMSTREAM_REINFORCE_THRESHOLD": "0.97", "MEMSTREAM_ASK_THRESHOLD": "0.5"}


def fact(statement: str, field: str | None = None, subject: str = "the user") -> dict[str, Any]:
    return {
        "facts": [
            {
                "subject": subject,
                "statement": statement,
                "owner": "user",
                "category": "basic_info",
                "profile_field": field,
            }
        ]
    }


def said(pipeline: PipelineHarness, user: str, session: str, *texts: str) -> None:
    pipeline.record(user, session, [{"role": "user", "content": text} for text in texts])
    pipeline.flush(user, session)


def current(pipeline: PipelineHarness, user: str) -> list[dict[str, Any]]:
    return pipeline.memories(user_id=user, status="current")


def script_a_move_from_lisbon_to_porto(pipeline: PipelineHarness) -> None:
    """The scripted LLM: "I live in Lisbon." then "I moved to Porto." are one location fact
    each, and reconciling Porto against Lisbon is an UPDATE."""
    pipeline.llm.on(
        "NEW: The user lives in Porto.",
        {"contradicts": 1, "action": "UPDATE", "existing": 1, "reason": "moved"},
        scope="last_user",
    )
    pipeline.llm.on(
        "I live in Lisbon", fact("The user lives in Lisbon.", "location"), scope="last_user"
    )
    pipeline.llm.on(
        "I moved to Porto", fact("The user lives in Porto.", "location"), scope="last_user"
    )


def reconcile_requests(pipeline: PipelineHarness) -> list[str]:
    return [
        r["messages"][-1]["content"]
        for r in pipeline.llm.chat_requests
        if r["messages"][-1]["content"].startswith("NEW:")
    ]


def test_a_changed_fact_updates_the_memory_and_keeps_the_old_version(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(**THRESHOLDS)
    script_a_move_from_lisbon_to_porto(pipeline)
    said(pipeline, "ivy", "s1", "I live in Lisbon.")
    eventually(lambda: current(pipeline, "ivy"), lambda m: len(m) == 1, what="the first memory")
    said(pipeline, "ivy", "s2", "I moved to Porto.")

    versions = eventually(
        lambda: pipeline.memories(user_id="ivy"),
        lambda m: len(m) == 2 and {v["status"] for v in m} == {"current", "superseded"},
        what="a new current version and a superseded one",
    )
    old, new = sorted(versions, key=lambda v: v["version"])
    assert old["memory_id"] == new["memory_id"]
    assert (old["text"], old["status"]) == ("The user lives in Lisbon.", "superseded")
    assert (new["text"], new["status"], new["version"]) == (
        "The user lives in Porto.",
        "current",
        2,
    )
    assert old["superseded_by"]["version"] == 2 and old["superseded_by"]["reason"] == "moved"
    assert reconcile_requests(pipeline) == [
        "NEW: The user lives in Porto.\nEXISTING:\n1. The user lives in Lisbon.\n"
        "Answer with the JSON."
    ]
    (update,) = eventually(
        lambda: list(pipeline.db["memory_events"].find({"event_type": "MemoryUpdated"})),
        lambda events: len(events) == 1,
        what="the MemoryUpdated event in memory_events",
    )
    provenance = update["event"]["provenance"]
    assert (provenance["reconciled_by"], provenance["prompt_version"]) == (
        "llm",
        SemanticExtractor.prompt_version,
    )
    assert provenance["embedding_model"] == pipeline.llm.embedding_model
    eventually(
        lambda: pipeline.db["profiles"].find_one({"_id": "ivy"}),
        lambda profile: (
            profile is not None
            and profile["fields"]["location"]["value"] == "The user lives in Porto."
        ),
        what="the profile's location updated to Porto",
    )


def test_a_restated_fact_is_reinforced_and_not_copied(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory(**THRESHOLDS)
    pipeline.llm.on("vegan", fact("The user is vegan."), scope="last_user")
    said(pipeline, "jo", "s1", "I'm vegan.")
    eventually(lambda: current(pipeline, "jo"), lambda m: len(m) == 1, what="the memory")
    said(pipeline, "jo", "s2", "As I said, I'm vegan.")

    (memory,) = eventually(
        lambda: current(pipeline, "jo"),
        lambda m: len(m) == 1 and m[0]["reinforcement_count"] == 1,
        what="one memory, reinforced once",
    )
    assert [e["snapshot_id"] for e in memory["evidence"]] == [
        s["_id"] for s in sorted(pipeline.snapshots(user_id="jo"), key=lambda s: s["session_id"])
    ]
    assert reconcile_requests(pipeline) == []  # a near-duplicate needs no LLM call
    second = pipeline.snapshots(user_id="jo", session_id="s2")[0]["extractions"]["semantic"]
    assert second["actions"] == ["MemoryReinforced"]
    assert second["usage"]["calls"] == 1
    from memstream.sdk.sync_client import SyncMemoryClient

    client = SyncMemoryClient(pipeline.settings)
    usage = client.llm_usage("jo")
    client.close()
    assert usage["semantic"]["snapshots"] == 2 and usage["semantic"]["calls"] == 2
    assert usage["semantic"]["prompt_tokens"] > 0


def test_restatements_back_to_back_are_one_add_and_one_reinforce_while_the_projection_lags(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(**THRESHOLDS)
    pipeline.llm.on("tennis", fact("The user plays tennis."), scope="last_user")
    projector = pipeline.pipeline.processes["projector"]
    projector.stop()  # MongoDB will know nothing until both snapshots are reconciled
    said(pipeline, "kai", "s1", "I play tennis.")
    said(pipeline, "kai", "s2", "Tennis again tonight, I play tennis every week.")
    time.sleep(8)
    projector.start()
    pipeline.pipeline.wait_ready(180, ["projector"])

    (memory,) = eventually(
        lambda: current(pipeline, "kai"),
        lambda m: len(m) == 1 and m[0]["reinforcement_count"] == 1,
        what="one memory reinforced once",
    )
    assert memory["text"] == "The user plays tennis."
    eventually(  # the log entries are written after the view (projections/memories.py)
        lambda: pipeline.db["memory_events"].count_documents({"user_id": "kai"}),
        lambda count: count == 2,
        timeout=10,
        what="two events in memory_events",
    )


def test_two_users_with_the_same_fact_never_touch_each_others_memories(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(**THRESHOLDS)
    pipeline.llm.on("Stripe", fact("The user works at Stripe.", "employer"), scope="last_user")
    said(pipeline, "lea", "s", "I work at Stripe.")
    said(pipeline, "max", "s", "I work at Stripe.")
    eventually(
        lambda: current(pipeline, "lea") + current(pipeline, "max"),
        lambda m: len(m) == 2,
        what="two memories",
    )
    said(pipeline, "max", "s2", "I work at Stripe, still.")
    (maxs,) = eventually(
        lambda: current(pipeline, "max"),
        lambda m: m and m[0]["reinforcement_count"] == 1,
        what="max reinforced",
    )
    (leas,) = current(pipeline, "lea")
    assert leas["reinforcement_count"] == 0 and leas["memory_id"] != maxs["memory_id"]


def test_an_llm_answer_across_subjects_is_never_applied(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory(**THRESHOLDS)
    # If it were asked, this LLM would point the user's new city at John's memory.
    pipeline.llm.on(
        "NEW:",
        {"contradicts": 1, "action": "UPDATE", "existing": 1, "reason": "moved"},
        scope="last_user",
    )
    pipeline.llm.on("Lisbon", fact("John lives in Lisbon.", subject="John"), scope="last_user")
    pipeline.llm.on("Porto", fact("The user lives in Porto.", "location"), scope="last_user")
    pipeline.record(
        "ned",
        "s1",
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "name": "John", "content": "I live in Lisbon."},
        ],
    )
    pipeline.flush("ned", "s1")
    eventually(lambda: current(pipeline, "ned"), lambda m: len(m) == 1, what="John's memory")
    said(pipeline, "ned", "s2", "I live in Porto.")
    memories = eventually(lambda: current(pipeline, "ned"), lambda m: len(m) == 2, what="both")
    assert {(m["subject"], m["text"]) for m in memories} == {
        ("John", "John lives in Lisbon."),
        ("the user", "The user lives in Porto."),
    }
    assert reconcile_requests(pipeline) == []  # no candidate about the same subject: no question


def test_a_disabled_type_makes_no_llm_call_yet_accepts_a_direct_save(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory(
        every_stage=True, MEMSTREAM_ENABLED_EXTRACTIONS="semantic", **THRESHOLDS
    )
    pipeline.llm.on("Stripe", fact("The user works at Stripe.", "employer"), scope="last_user")
    said(pipeline, "ola", "s", "I work at Stripe. Always answer me in Portuguese.")
    eventually(lambda: current(pipeline, "ola"), lambda m: len(m) == 1, what="the semantic memory")
    save_id = pipeline.save(
        "ola",
        "procedural",
        "When the user writes: answer in Portuguese.",
        attributes={
            "trigger": "the user writes",
            "steps": ["answer in Portuguese"],
            "kind": "rule",
        },
    )
    (saved,) = eventually(
        lambda: pipeline.memories(user_id="ola", memory_type="procedural"),
        lambda m: len(m) == 1,
        what="the saved procedural memory",
    )
    assert saved["text"] == "When the user writes: answer in Portuguese."
    assert saved["evidence"][0]["source"] == "sdk"
    (outcome,) = pipeline.db["saves"].find({"save_id": save_id})
    assert outcome["actions"] == ["MemoryAdded"]
    systems = {r["messages"][0]["content"][:60] for r in pipeline.llm.chat_requests}
    assert (
        len(pipeline.llm.chat_requests) == 1 and len(systems) == 1
    )  # the semantic extraction only

    pipeline.save("ola", "procedural", "When the user writes: answer in Portuguese.")
    eventually(
        lambda: pipeline.memories(user_id="ola", memory_type="procedural"),
        lambda m: m[0]["reinforcement_count"] == 1,
        what="the same save again reinforces it",
    )
    assert len(pipeline.memories(user_id="ola", memory_type="procedural")) == 1
