"""Consolidation through the running pipeline: a user's near-duplicate memories are merged and
contradicting ones superseded, one LLM call per cluster; another subject is never touched; the
retired memories leave search, `memories()` and the context and stay in history; the run's cost
is reported; the budget stops the run at a cluster, a bad answer is asked again, and a request
read again decides nothing twice.

The scripted LLM's embeddings are hashed bags of words: "The user lives in Lisbon." and "... in
Porto." are 0.8 alike, "The user has a dog named Rex." and "The user owns a dog named Rex."
0.86, so reconciliation (asking at 0.9) ADDs each of them and consolidation (at 0.75) finds them.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from handlers.consolidation_prompt import OPENING, PROMPT_VERSION
from memstream.sdk.client import MemoryClient
from memstream.sdk.sync_client import SyncMemoryClient
from tests.streams.test_reconciliation import fact, said
from tests.support.pipeline import PipelineHarness, eventually

pytestmark = pytest.mark.integration

SETTINGS = {
    "MEMSTREAM_REINFORCE_THRESHOLD": "0.97",
    "MEMSTREAM_ASK_THRESHOLD": "0.9",
    "MEMSTREAM_CONSOLIDATE_THRESHOLD": "0.75",
}
FACTS = [
    "The user lives in Lisbon.",
    "The user lives in Porto.",
    "The user has a dog named Rex.",
    "The user owns a dog named Rex.",
    "The user likes the sea.",
]
MERGED = "The user has a dog named Rex (owned for years)."


def listed(body: dict[str, Any]) -> list[str]:
    """The memories a consolidation question numbers, in order."""
    question = next(m["content"] for m in body["messages"] if m["content"].startswith("MEMORIES"))
    return re.findall(r"^\d+\. (.*)$", question, re.MULTILINE)


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """Porto supersedes Lisbon; the two dogs are merged."""
    shown = listed(body)
    if any("Porto" in text for text in shown):
        porto = next(n for n, text in enumerate(shown, 1) if "Porto" in text)
        return {"action": "SUPERSEDE", "keep": porto, "text": None, "reason": "moved to Porto"}
    return {"action": "MERGE", "keep": 1, "text": MERGED, "reason": "the same dog"}


def consolidation_calls(pipeline: PipelineHarness) -> list[dict[str, Any]]:
    return [
        r for r in pipeline.llm.chat_requests if r["messages"][0]["content"].startswith(OPENING)
    ]


def resent(pipeline: PipelineHarness, request_id: str) -> None:
    """Write a consolidation request with the id `request_id` again (a redelivery)."""

    async def send() -> None:
        async with MemoryClient(pipeline.settings, new_id=lambda: request_id) as client:
            await client.consolidate("ivy", requested_by="ops:alice", reason="weekly tidy-up")

    asyncio.run(send())


def saved(client: SyncMemoryClient, user: str, *texts: str, subject: str = "the user") -> None:
    for text in texts:
        client.save(user, "semantic", text, subject=subject)
    eventually(
        lambda: client.memories(user),
        lambda found: len(found) >= len(texts),
        what=f"{user}'s saves",
    )


def test_duplicates_merge_contradictions_supersede_and_history_says_by_what(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(**SETTINGS)
    pipeline.llm.on(OPENING, answer)
    with SyncMemoryClient(pipeline.settings) as client:
        saved(client, "ivy", *FACTS)
        saved(client, "ivy", "John lives in Lisbon.", "John lives in Porto.", subject="John")
        saved(client, "max", "The user lives in Lisbon.", "The user lives in Porto.")
        before = {m["text"]: m["memory_id"] for m in client.memories("ivy")}
        assert len(before) == 7  # nothing was reconciled away on the way in

        request = client.consolidate("ivy", requested_by="ops:alice", reason="weekly tidy-up")
        (run,) = client.wait_for_consolidation("ivy", request, timeout=90)
        assert (run["memory_type"], run["requested_by"], run["reason"]) == (
            "semantic",
            "ops:alice",
            "weekly tidy-up",
        )
        assert (run["clusters_found"], run["clusters_asked"], run["clusters_skipped"]) == (3, 3, 0)
        assert run["usage"]["calls"] == 3 and run["usage"]["prompt_tokens"] > 0
        assert run["prompt_version"] == PROMPT_VERSION and run["unchanged"] is None
        assert sorted(c["action"] for c in run["clusters"]) == ["merge", "supersede", "supersede"]
        assert len(consolidation_calls(pipeline)) == 3
        for call in consolidation_calls(pipeline):  # one subject per question: John's apart
            subjects = {text.startswith("John") for text in listed(call)}
            assert len(subjects) == 1 and len(listed(call)) == 2

        current = eventually(
            lambda: sorted(m["text"] for m in client.memories("ivy")),
            lambda texts: len(texts) == 4,
            what="the consolidated memories",
        )
        assert current == sorted(
            ["John lives in Porto.", MERGED, "The user likes the sea.", "The user lives in Porto."]
        )
        hits = client.search("ivy", "where does the user live", limit=10)
        assert "The user lives in Lisbon." not in [h["text"] for h in hits]
        context = client.build_context("ivy", "where does the user live and which dog")
        assert "The user lives in Lisbon." not in context
        assert "The user owns a dog named Rex." not in context

        lisbon = client.history("ivy", before["The user lives in Lisbon."])
        assert [(v["version"], v["status"]) for v in lisbon] == [(1, "retired")]
        retired_into = lisbon[0].get("retired_into")
        assert retired_into is not None
        assert retired_into["memory_id"] == before["The user lives in Porto."]
        assert (retired_into["action"], retired_into["consolidation_id"]) == ("supersede", request)
        porto = client.history("ivy", before["The user lives in Porto."])
        assert [(v["version"], v["status"]) for v in porto] == [(1, "superseded"), (2, "current")]
        made = porto[1]["created_by"]
        assert made is not None and f"consolidation {request}" in made["event"]["reason"]
        assert "moved to Porto" in made["event"]["reason"]
        assert porto[1]["text"] == "The user lives in Porto."

        # Another user's alike memories were never read.
        assert len(client.memories("max")) == 2
        # The log holds the survivors' new versions as ordinary updates.
        logged = [e.event_type for e in client.events("ivy")]
        assert logged.count("MemoryUpdated") == 3

        # The same request read again decides nothing twice; a new one finds nothing left.
        resent(pipeline, request)
        again = client.consolidate("ivy", requested_by="ops:alice")
        (second,) = client.wait_for_consolidation("ivy", again, timeout=90)
        assert second["clusters_found"] == 0 and second["unchanged"] is not None
        assert len(consolidation_calls(pipeline)) == 3
        assert pipeline.db["consolidations"].count_documents({"consolidation_id": request}) == 1
    assert pipeline.db["dead_letters"].count_documents({}) == 0


def test_the_budget_stops_the_run_and_a_bad_answer_is_asked_again(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(**SETTINGS)
    answers = iter(["not json at all"])

    def first_bad_then_good(body: dict[str, Any]) -> Any:
        return next(answers, None) or json.dumps(answer(body))

    pipeline.llm.on(OPENING, first_bad_then_good)
    with SyncMemoryClient(pipeline.settings) as client:
        saved(client, "ivy", *FACTS)
        request = client.consolidate(
            "ivy", memory_types=["semantic"], max_calls=2, requested_by="cli:bob"
        )
        (run,) = client.wait_for_consolidation("ivy", request, timeout=90)
        assert (run["clusters_found"], run["clusters_asked"], run["clusters_skipped"]) == (2, 1, 1)
        assert run["usage"]["calls"] == 2  # the bad answer and the one asked again
        actions = [c["action"] for c in run["clusters"]]
        assert actions[1] == "skipped" and actions[0] in ("merge", "supersede")
        asked_again = consolidation_calls(pipeline)[1]["messages"][-1]["content"]
        assert "That answer was invalid" in asked_again
        eventually(lambda: client.memories("ivy"), lambda m: len(m) == 4, what="one cluster done")

        rest = client.consolidate("ivy", max_calls=5, requested_by="cli:bob")
        (second,) = client.wait_for_consolidation("ivy", rest, timeout=90)
        assert (second["clusters_found"], second["clusters_asked"]) == (1, 1)
        assert second["usage"]["calls"] == 1
        eventually(lambda: client.memories("ivy"), lambda m: len(m) == 3, what="both done")
        nothing = client.consolidate("ivy", max_calls=0, requested_by="cli:bob")
        (empty,) = client.wait_for_consolidation("ivy", nothing, timeout=90)
        assert empty["unchanged"] == "no cluster of similar memories of one subject"
    assert len(consolidation_calls(pipeline)) == 3


def test_forgetting_the_session_of_a_retired_memory_erases_it(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory(every_stage=True, **SETTINGS)
    pipeline.llm.on(OPENING, answer)
    pipeline.llm.on("I live in Lisbon", fact("The user lives in Lisbon."), scope="last_user")
    pipeline.llm.on("I moved to Porto", fact("The user lives in Porto."), scope="last_user")
    said(pipeline, "ann", "a1", "I live in Lisbon.")
    said(pipeline, "ann", "a2", "I moved to Porto.")
    eventually(lambda: pipeline.memories(user_id="ann"), lambda m: len(m) == 2, what="two")
    with SyncMemoryClient(pipeline.settings) as client:
        request = client.consolidate("ann", requested_by="ops:alice")
        (run,) = client.wait_for_consolidation("ann", request, timeout=90)
        assert [c["action"] for c in run["clusters"]] == ["supersede"]
        (lisbon,) = run["retired"]
        eventually(lambda: client.memories("ann"), lambda m: len(m) == 1, what="one current")

        erased = client.wait_for_erasure(client.forget_session("ann", "a1"), timeout=120)
        assert erased["complete"]
        assert pipeline.db["memories"].count_documents({"memory_id": lisbon["memory_id"]}) == 0
        assert "Lisbon" not in str(list(pipeline.db["memory_events"].find({"user_id": "ann"})))
        assert [m["text"] for m in client.memories("ann")] == ["The user lives in Porto."]
