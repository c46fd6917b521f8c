"""The SDK's reads against a running pipeline: search, context, history, point in time, events."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from memstream.sdk.client import MemoryClient
from memstream.sdk.results import (
    ErasureReceipt,
    Evidence,
    LlmUsage,
    Memory,
    MemoryLogEntry,
    MemoryVersion,
    Provenance,
    SearchHit,
    Snapshot,
    SnapshotExtraction,
    Supersession,
    Turn,
)
from memstream.sdk.sync_client import SyncMemoryClient
from tests.support.pipeline import PipelineHarness, eventually
from tests.support.results import assert_conforms
from tests.support.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.integration
THRESHOLDS = {"MEMSTREAM_REINFORCE_THRESHOLD": "0.97", "MEMSTREAM_ASK_THRESHOLD": "0.5"}


def facts(*statements: str) -> dict[str, Any]:
    return {
        "facts": [
            {"subject": "the user", "statement": s, "owner": "user", "category": "other"}
            for s in statements
        ]
    }


@pytest.fixture
def learned(pipeline_factory: Any) -> PipelineHarness:
    """A pipeline of its own (for a test that writes) where `pia` said where she lives, works,
    what she drinks, then moved."""
    return taught(pipeline_factory(every_stage=True, **THRESHOLDS))


@pytest.fixture(scope="module")
def learned_once(broker: Any, mongo: Any, tmp_path_factory: Any) -> Iterator[PipelineHarness]:
    """The same, shared by this module's tests that only read (a pipeline start is most of
    what an integration test costs)."""
    with ScriptedLLM() as llm:
        harness = PipelineHarness(
            broker=broker,
            mongo_uri=mongo.uri,
            llm=llm,
            run_id=uuid.uuid4().hex[:10],
            log_dir=tmp_path_factory.mktemp("reads"),
            environment=dict(THRESHOLDS),
            every_stage=True,  # status lists every stage; an erasure waits for each
        )
        try:
            yield taught(harness.start())
        finally:
            harness.discard()


CLIMB = [
    {"role": "assistant", "content": "Which mountain did you climb last weekend?"},
    {"role": "user", "content": "Mont Blanc, with my sister."},
]
"""`kai`'s answer shares no word with a question about it; the question it answers does."""
SWIM = [
    [{"role": "assistant", "content": "And which lake did you swim in after?"}],
    [{"role": "user", "content": "Lac Blanc, it was freezing."}],
]
"""Another such pair, the question and the answer flushed as two snapshots of one session."""


def taught(pipeline: PipelineHarness) -> PipelineHarness:
    llm = pipeline.llm
    llm.on(
        "NEW: The user lives in Porto.",
        {"contradicts": 1, "action": "UPDATE", "existing": 1},
        scope="last_user",
    )
    llm.on(
        "first chat",
        facts(
            "The user lives in Lisbon.",
            "The user works at Stripe as an engineer.",
            "The user drinks green tea every morning.",
        ),
        scope="last_user",
    )
    llm.on("second chat", facts("The user lives in Porto."), scope="last_user")
    first = (
        "first chat: I live in Lisbon, I work at Stripe as an engineer, "
        "I drink green tea every morning."
    )
    pipeline.record("pia", "s1", [{"role": "user", "content": first}])
    pipeline.flush("pia", "s1")
    eventually(lambda: pipeline.memories(user_id="pia"), lambda m: len(m) == 3, what="3 memories")
    pipeline.record("pia", "s2", [{"role": "user", "content": "second chat: I moved to Porto."}])
    pipeline.flush("pia", "s2")
    eventually(lambda: pipeline.memories(user_id="pia"), lambda m: len(m) == 4, what="an update")
    pipeline.record("zed", "s1", [{"role": "user", "content": first}])
    pipeline.flush("zed", "s1")
    pipeline.record("kai", "k1", CLIMB)
    pipeline.flush("kai", "k1")
    for said in SWIM:
        pipeline.record("kai", "k1", said)
        pipeline.flush("kai", "k1")
    eventually(
        lambda: pipeline.memories(user_id="zed"), lambda m: len(m) == 3, what="zed's memories"
    )
    types = set(pipeline.settings.memory.extraction.enabled)
    eventually(  # a replay of the log must meet every result the read model has
        lambda: pipeline.snapshots(),
        lambda s: len(s) == 6 and all(types <= set(x.get("extractions", {})) for x in s),
        what="the six snapshots (pia 2, zed 1, kai 3) extracted by every enabled type",
    )
    return pipeline


def test_search_finds_the_current_answer_and_only_the_users_own(
    learned_once: PipelineHarness,
) -> None:
    with SyncMemoryClient(learned_once.settings) as client:
        for mode in ("hybrid", "vector", "keyword"):
            found = client.search("pia", "the user lives in", limit=2, mode=mode)
            assert found and found[0]["text"] == "The user lives in Porto.", mode
            assert all(m["user_id"] == "pia" and m["status"] == "current" for m in found)
        tea = client.search("pia", "tea", limit=1)
        assert tea[0]["text"] == "The user drinks green tea every morning."
        assert tea[0]["keyword_score"] > 0 and tea[0]["vector_score"] is not None
        assert client.search("pia", "tea", types=["episodic"]) == []
        assert client.search("pia", "tea", subject="John") == []


def test_reads_and_an_erasure_receipt_have_exactly_the_fields_their_result_types_declare(
    learned_once: PipelineHarness,
) -> None:
    with SyncMemoryClient(learned_once.settings) as client:
        versions = client.memories("pia", history=True)
        assert {v["status"] for v in versions} == {"current", "superseded"}
        for memory in versions:
            assert_conforms(memory, Memory)
            assert memory["provenance"] is not None
            assert_conforms(memory["provenance"], Provenance)
            for evidence in memory["evidence"]:
                assert_conforms(evidence, Evidence)
            if memory["superseded_by"] is not None:
                assert_conforms(memory["superseded_by"], Supersession)
        for hit in client.search("pia", "where does the user live"):
            assert_conforms(hit, SearchHit)
        (porto,) = [m for m in client.memories("pia") if "Porto" in m["text"]]
        for version in client.history("pia", porto["memory_id"]):
            assert_conforms(version, MemoryVersion)
            assert version["created_by"] is not None
            assert_conforms(version["created_by"], MemoryLogEntry)
        for usage in client.llm_usage("pia").values():
            assert_conforms(usage, LlmUsage)
        turns = client.recent_turns("pia", "s1")
        assert turns and all(turn["snapshot_id"] is not None for turn in turns)
        for turn in turns:
            assert_conforms(turn, Turn)
        snapshots = client.snapshots("pia")
        assert {snapshot["session_id"] for snapshot in snapshots} == {"s1", "s2"}
        for snapshot in snapshots:
            assert_conforms(snapshot, Snapshot)
            for extraction in snapshot.get("extractions", {}).values():
                assert_conforms(extraction, SnapshotExtraction)
        # A session with no data, of a user no other test reads: the receipt counts nothing.
        request_id = client.forget_session("vic", "never-recorded")
        receipt = client.wait_for_erasure(request_id, timeout=120)
        assert_conforms(receipt, ErasureReceipt)
        assert client.erasures("vic") == [receipt]


def test_history_lists_every_version_with_the_event_that_made_it(
    learned_once: PipelineHarness,
) -> None:
    with SyncMemoryClient(learned_once.settings) as client:
        (porto,) = [m for m in client.memories("pia") if "Porto" in m["text"]]
        versions = client.history("pia", porto["memory_id"])
        assert [(v["version"], v["status"], v["text"]) for v in versions] == [
            (1, "superseded", "The user lives in Lisbon."),
            (2, "current", "The user lives in Porto."),
        ]
        assert [v["created_by"]["event_type"] for v in versions] == ["MemoryAdded", "MemoryUpdated"]
        assert client.history("zed", porto["memory_id"]) == []  # never across users


def test_memories_as_of_a_past_time_show_the_version_current_then(
    learned_once: PipelineHarness,
) -> None:
    with SyncMemoryClient(learned_once.settings) as client:
        versions = client.memories("pia", history=True)
        (old,) = [v for v in versions if v["text"] == "The user lives in Lisbon."]
        (new,) = [v for v in versions if v["text"] == "The user lives in Porto."]
        assert old["created_at"] < new["created_at"]
        then = {m["text"] for m in client.memories("pia", as_of=old["created_at"])}
        assert "The user lives in Lisbon." in then and "The user lives in Porto." not in then
        now = {m["text"] for m in client.memories("pia", as_of=datetime.now(UTC))}
        assert now == {m["text"] for m in client.memories("pia")}


def test_build_context_fits_its_limit_with_profile_memories_and_the_session(
    learned: PipelineHarness,
) -> None:
    learned.record("pia", "s3", [{"role": "user", "content": "What should I drink today?"}])
    with SyncMemoryClient(learned.settings) as client:
        eventually(lambda: client.recent_turns("pia", "s3"), bool, what="the new turn projected")
        block = client.build_context(
            "pia", "What should I drink?", session_id="s3", max_chars=400, past_messages=0
        )
        assert len(block) <= 400
        assert "## Facts" in block and "The user drinks green tea every morning." in block
        assert block.endswith("[user]: What should I drink today?")
        assert "Lisbon" not in block  # superseded: not current


def past_section(block: str) -> str:
    """The lines of a context block's "From earlier conversations" section."""
    return block.split("## From earlier conversations\n")[1].split("\n\n")[0]


def kais_past_messages(harness: PipelineHarness, question: str, answer: str) -> str:
    """The past messages of kai's context for `question` in a new session, once `answer`
    (a message of kai's) is among them."""
    with SyncMemoryClient(harness.settings) as client:
        block = eventually(
            lambda: client.build_context("kai", question, session_id="k2"),
            lambda shown: answer in shown,
            what=f"kai's answer {answer!r} recalled",
        )
    return past_section(block)


def test_build_context_recalls_the_users_own_earlier_messages_dated_outside_the_session(
    learned_once: PipelineHarness,
) -> None:
    with SyncMemoryClient(learned_once.settings) as client:
        block = client.build_context("pia", "Where did I move?", session_id="s1")
        past = past_section(block)
        assert re.fullmatch(r"- \[\d{1,2} \w+ \d{4}\] User: second chat: I moved to Porto\.", past)
        assert "## This conversation so far" in block  # s1's own message is there, not above
        zeds = client.build_context("zed", "Where did I move to Porto?")
        assert "moved to Porto" not in zeds  # another user's messages are never recalled
        assert "## From earlier conversations" not in client.build_context(
            "pia", "Where did I move?", past_messages=0
        )


def test_build_context_without_memories_shows_the_same_past_messages_and_no_facts(
    learned_once: PipelineHarness,
) -> None:
    with SyncMemoryClient(learned_once.settings) as client:
        full = client.build_context("pia", "Where did I move?", session_id="s1")
        messages_only = client.build_context(
            "pia", "Where did I move?", session_id="s1", per_type=0
        )
        assert "## Facts" in full and "## Facts" not in messages_only
        assert past_section(messages_only) == past_section(full)


def test_build_context_recalls_an_answer_by_the_question_said_just_before_it(
    learned_once: PipelineHarness,
) -> None:
    past = kais_past_messages(learned_once, "What mountain did I climb?", "Mont Blanc")
    assert re.search(r"^- \[\d{1,2} \w+ \d{4}\] User: Mont Blanc, with my sister\.$", past, re.M)
    assert "Which mountain" in past  # the question itself is recalled too, by its own words


def test_build_context_recalls_an_answer_by_the_question_that_ended_the_snapshot_before(
    learned_once: PipelineHarness,
) -> None:
    past = kais_past_messages(learned_once, "What lake did I swim in?", "Lac Blanc")
    assert re.search(r"^- \[\d{1,2} \w+ \d{4}\] User: Lac Blanc, it was freezing\.$", past, re.M)


def test_build_context_reranked_by_meaning_still_recalls_an_answer_by_its_question(
    learned_once: PipelineHarness,
) -> None:
    memory = learned_once.settings.memory.model_copy(update={"rerank_past_messages": True})
    settings = learned_once.settings.model_copy(update={"memory": memory})
    with SyncMemoryClient(settings) as client:
        block = eventually(
            lambda: client.build_context("kai", "What mountain did I climb?", session_id="k2"),
            lambda shown: "Mont Blanc" in shown,
            what="kai's answer recalled with the rerank on",
        )
    past = past_section(block)
    assert re.search(r"^- \[\d{1,2} \w+ \d{4}\] User: Mont Blanc, with my sister\.$", past, re.M)


def test_events_replay_then_follow_live(learned: PipelineHarness) -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        async with MemoryClient(learned.settings) as client:
            replayed = [e.event_type async for e in client.events("pia")]
            live: list[str] = []

            async def follow() -> None:
                async for event in client.events("pia", follow=True):
                    live.append(event.event_type)
                    if event.event_type == "MemoryAdded" and len(live) > len(replayed):
                        return

            task = asyncio.create_task(follow())
            await asyncio.sleep(1)
            await client.save("pia", "semantic", "The user plays the cello.")
            await asyncio.wait_for(task, 120)
            return replayed, live

    replayed, live = asyncio.run(scenario())
    assert replayed == ["MemoryAdded", "MemoryAdded", "MemoryAdded", "MemoryUpdated"]
    assert live == [*replayed, "MemoryAdded"]
    with SyncMemoryClient(learned.settings) as client:
        assert [e.user_id for e in client.events("zed")] == ["zed"] * 3
        later = client.events("pia", since=datetime.now(UTC))
        assert later == []


def memstream_cli(pipeline: PipelineHarness, *args: str, timeout: float = 120) -> Any:
    import os
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "memstream", *args],
        env={**os.environ, **pipeline.environment},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_events_command_prints_json_lines(learned_once: PipelineHarness) -> None:
    import json

    result = memstream_cli(learned_once, "events", "--user", "pia", "--json")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["event_type"] for e in events] == ["MemoryAdded"] * 3 + ["MemoryUpdated"]
    assert {e["user_id"] for e in events} == {"pia"}


def test_the_status_command_reports_health_lag_and_waiting_work(
    learned_once: PipelineHarness,
) -> None:
    import json

    result = memstream_cli(learned_once, "status", "--json")
    report = json.loads(result.stdout)
    assert report["broker"]["reachable"] and report["database"]["reachable"]
    assert report["enabled_types"] == ["semantic"]
    assert set(report["consumer_lag"]) == {
        "window",
        "extract:semantic",
        "extract:episodic",
        "extract:procedural",
        "extract:taxonomic",
        "projector",
    }
    assert report["snapshots_waiting"] == {"semantic": 0}
    assert report["health"] == "healthy" and result.returncode == 0
    assert report["models"]["llm"].startswith(
        f"{learned_once.llm.model} at {learned_once.llm.base_url}"
    )
    text = memstream_cli(learned_once, "status")
    assert text.stdout.startswith("health: healthy")
    assert "dead letters: none" in text.stdout
    assert "llm: scripted-llm at http" in text.stdout and ", reachable" in text.stdout
    assert "embedder: " in text.stdout


def test_every_named_query_runs_and_prints_its_pipeline(learned_once: PipelineHarness) -> None:
    import json

    def query(*args: str) -> list[dict[str, Any]]:
        result = memstream_cli(learned_once, "query", *args, "--json")
        assert result.returncode == 0, result.stderr
        return [json.loads(line) for line in result.stdout.splitlines()]

    counts = query("counts")
    assert {(r["user_id"], r["memory_type"], r["memories"]) for r in counts} == {
        ("pia", "semantic", 3),
        ("zed", "semantic", 3),
    }
    (superseded,) = query("superseded", "--user", "pia")
    assert (superseded["text"], superseded["replaced_by"]) == (
        "The user lives in Lisbon.",
        "The user lives in Porto.",
    )
    memory_id = next(
        m["memory_id"] for m in learned_once.memories(user_id="pia") if "Porto" in m["text"]
    )
    assert [r["version"] for r in query("lineage", "--user", "pia", "--memory", memory_id)] == [
        1,
        2,
    ]
    assert query("most-reinforced") == []
    assert {r["reason"] for r in query("promotions")} == {"flush"}
    assert query("waiting") == [{"memory_type": "semantic", "waiting": 0}]
    assert query("dead-letters") == []
    csv = memstream_cli(learned_once, "query", "counts", "--csv").stdout.splitlines()
    assert set(csv[0].split(",")) == {"user_id", "memory_type", "memories"} and len(csv) == 3
    explained = memstream_cli(
        learned_once, "query", "superseded", "--user", "pia", "--explain"
    ).stdout
    assert explained.startswith("db.memories.aggregate([") and '"user_id": "pia"' in explained
    listed = memstream_cli(learned_once, "query").stdout
    assert "most-reinforced" in listed and "dead-letters" in listed


def test_replay_from_the_log_and_from_the_collections_verifies_without_difference(
    learned: PipelineHarness,
) -> None:
    learned.save("pia", "procedural", "When the user asks for tea: suggest green tea.")
    eventually(lambda: learned.db["saves"].count_documents({}), lambda n: n == 1, what="the save")
    database = learned.settings.mongodb.database
    from_log = f"{database}_log"
    result = memstream_cli(learned, "replay", "--into", from_log)
    assert result.returncode == 0, result.stderr
    assert "events/s" in result.stdout
    verified = memstream_cli(learned, "verify", "--against", from_log)
    assert verified.stdout.strip().endswith("no differences"), verified.stdout
    assert verified.returncode == 0

    again = memstream_cli(learned, "replay", "--into", from_log)
    assert again.returncode == 2 and "not empty" in again.stderr

    from_collections = f"{database}_cols"
    rebuilt = memstream_cli(learned, "replay", "--from-collections", "--into", from_collections)
    assert rebuilt.returncode == 0, rebuilt.stderr
    verified = memstream_cli(learned, "verify", "--against", from_collections)
    assert verified.stdout.strip().endswith("no differences"), verified.stdout
