"""The whole pipeline on a real broker (Tansu and Apache Kafka) and SecantusDB."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.structs import OffsetAndMetadata

from events.codec import decode
from events.turns import TurnRecorded
from handlers.sealed_events import opener
from memstream.runtime.worker import stream_settings
from projections.vectors import unpack_vector
from tests.factories import STRIPE_FACTS
from tests.support.pipeline import PipelineHarness, eventually

pytestmark = pytest.mark.integration


def turns_of(snapshot: dict[str, Any]) -> list[str]:
    return list(snapshot["turn_ids"])


def test_two_sessions_promote_by_count_idle_and_flush(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory()
    pipeline.llm.on("Stripe", STRIPE_FACTS, scope="last_user")

    pipeline.record(
        "tim",
        "a",
        [
            {"role": "user", "content": "I work at Stripe."},
            {"role": "assistant", "content": "Nice!"},
            {"role": "user", "content": "Yes, in payments."},
            {"role": "assistant", "content": "Sounds interesting."},
        ],
    )
    pipeline.record(
        "tim",
        "b",
        [
            {"role": "user", "content": "What's the weather?"},
            {"role": "assistant", "content": "Sunny."},
            {"role": "user", "content": "Thanks."},
        ],
    )
    pipeline.record(
        "tim",
        "a",
        [
            {"role": "user", "content": "One more thing."},
            {"role": "assistant", "content": "Sure."},
        ],
    )
    pipeline.flush("tim", "a")

    snapshots = eventually(
        lambda: pipeline.snapshots(user_id="tim"),
        lambda s: len(s) == 3,
        timeout=90,
        what="three snapshots",
    )
    by_session = {(s["session_id"], s["seq"]): s for s in snapshots}
    assert by_session["a", 0]["reason"] == "count"
    assert by_session["a", 0]["turn_count"] == 4
    assert by_session["a", 1]["reason"] == "flush"
    assert by_session["a", 1]["turn_count"] == 2
    assert by_session["b", 0]["reason"] == "idle"
    assert by_session["b", 0]["turn_count"] == 3
    assert by_session["a", 0]["raw_history"].startswith("[user]: I work at Stripe.\n[assistant]:")

    turns = eventually(
        lambda: list(pipeline.db["turns"].find({"user_id": "tim"})),
        lambda t: len(t) == 9 and all(turn["snapshot_id"] for turn in t),
        what="nine turns, each linked to its snapshot",
    )
    promoted = [turn_id for snapshot in snapshots for turn_id in turns_of(snapshot)]
    assert sorted(promoted) == sorted(turn["_id"] for turn in turns)

    memories = eventually(
        lambda: pipeline.memories(user_id="tim"), lambda m: len(m) == 1, what="one memory"
    )
    memory = memories[0]
    assert (memory["subject"], memory["owner"], memory["text"]) == (
        "the user",
        "user",
        "The user works at Stripe.",
    )
    assert memory["status"] == "current" and memory["version"] == 1
    assert memory["evidence"][0]["snapshot_id"] == by_session["a", 0]["_id"]
    extracted = {
        (s["session_id"], s["seq"]): s["extractions"]["semantic"]
        for s in eventually(
            lambda: pipeline.snapshots(user_id="tim"),
            lambda s: all("extractions" in x for x in s),
            what="every snapshot extracted",
        )
    }
    assert extracted["a", 0]["memory_ids"] == [memory["memory_id"]]
    assert extracted["a", 1]["memory_ids"] == extracted["b", 0]["memory_ids"] == []
    assert len(unpack_vector(memory["embedding"])) == pipeline.llm.dims
    # The log entry and the profile are written after the view (projections/batch.py).
    profile = eventually(
        lambda: pipeline.db["profiles"].find_one({"_id": "tim"}),
        lambda found: found is not None,
        timeout=10,
        what="tim's profile",
    )
    assert pipeline.db["memory_events"].count_documents({"memory_id": memory["memory_id"]}) == 1
    assert profile["fields"]["employer"]["value"] == "The user works at Stripe."

    # The extractor saw each snapshot's whole conversation, rendered, exactly once.
    asked = [request["messages"][-1]["content"] for request in pipeline.llm.chat_requests]
    assert len(asked) == 3
    assert any("[user]: I work at Stripe." in text for text in asked)
    assert all(
        request["response_format"] == {"type": "json_object"}
        for request in pipeline.llm.chat_requests
    )


def test_worker_killed_mid_session_loses_and_duplicates_no_turn(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory(MEMSTREAM_MAX_MESSAGES="3")
    sent: list[str] = []

    def say(session: str, count: int) -> None:
        messages = [
            {"role": "user", "content": f"{session} message {len(sent) + i}"} for i in range(count)
        ]
        pipeline.record("ann", session, messages)
        sent.extend(m["content"] for m in messages)

    say("s1", 2)
    say("s2", 1)
    pipeline.pipeline.restart("window", kill=True)  # SIGKILL mid-session, then start again
    say("s1", 2)
    say("s2", 1)
    pipeline.pipeline.restart("window", kill=True)
    say("s1", 1)
    pipeline.flush("ann", "s1")
    pipeline.flush("ann", "s2")

    def promoted_turns() -> list[str]:
        return [
            tid for snapshot in pipeline.snapshots(user_id="ann") for tid in snapshot["turn_ids"]
        ]

    promoted = eventually(
        promoted_turns,
        lambda ids: len(ids) >= len(sent),
        timeout=300,  # two SIGKILLed workers rejoin the group; slow on a loaded machine
        what=f"{len(sent)} promoted turns",
    )
    assert len(promoted) == len(set(promoted)) == len(sent), "a turn was lost or promoted twice"
    contents = {t["_id"]: t["content"] for t in pipeline.db["turns"].find({"user_id": "ann"})}
    assert sorted(contents[tid] for tid in promoted) == sorted(sent)
    for snapshot in pipeline.snapshots(user_id="ann"):
        seqs = [
            s["seq"] for s in pipeline.snapshots(user_id="ann", session_id=snapshot["session_id"])
        ]
        assert seqs == list(range(len(seqs)))


class _AsFaust(RoundRobinPartitionAssignor):  # type: ignore[misc]
    name = "faust"  # the group's protocol: Tansu keeps it while the group is empty
    version = 4


def commit_window_past(pipeline: PipelineHarness, content: str) -> None:
    """Do what Faust does around a rebalance: commit the window's group past the turn whose
    content is `content`, which no worker has applied. The window worker must be stopped."""
    kafka = pipeline.settings.kafka
    topic = kafka.topics.turns

    async def offset_of() -> tuple[TopicPartition, int]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(kafka.partitions)])
            while True:
                batches = await consumer.getmany(timeout_ms=1000)
                for tp, records in batches.items():
                    for record in records:
                        if record.value is not None and opened_content(record.value) == content:
                            return tp, record.offset
        finally:
            await consumer.stop()

    ring = pipeline.key_ring()

    def opened_content(value: bytes) -> str | None:
        """The turn's content, opened with the pipeline's keys (turns are sealed)."""
        event = decode(value, opener(ring))
        return event.content if isinstance(event, TurnRecorded) else None

    async def commit(tp: TopicPartition, offset: int) -> None:
        # As a member of the group: Tansu refuses commits from non-members.
        consumer = AIOKafkaConsumer(
            bootstrap_servers=kafka.bootstrap_servers,
            group_id=stream_settings(pipeline.settings).group("window"),
            partition_assignment_strategy=(_AsFaust,),
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
        )
        await consumer.start()
        try:
            consumer.subscribe([topic])
            while tp not in consumer.assignment():
                await consumer.getmany(timeout_ms=200)
            await consumer.commit({tp: OffsetAndMetadata(offset, "")})
        finally:
            await consumer.stop()

    tp, offset = asyncio.run(asyncio.wait_for(offset_of(), 60))
    asyncio.run(asyncio.wait_for(commit(tp, offset + 1), 120))


def promoted_contents(pipeline: PipelineHarness, user_id: str) -> list[list[str]]:
    contents = {t["_id"]: t["content"] for t in pipeline.db["turns"].find({"user_id": user_id})}
    return [
        [contents.get(tid, "?") for tid in snapshot["turn_ids"]]
        for snapshot in pipeline.snapshots(user_id=user_id)
    ]


def test_a_turn_the_consumer_committed_past_is_read_back(pipeline_factory: Any) -> None:
    """Faust can acknowledge a record without applying it (around a rebalance) and commit past
    it. The next record of the partition reveals the gap; the window reads it from the log."""
    pipeline: PipelineHarness = pipeline_factory(
        MEMSTREAM_MAX_MESSAGES="10", MEMSTREAM_IDLE_TIMEOUT="600"
    )
    pipeline.record("cy", "s", [{"role": "user", "content": f"early {i}"} for i in range(2)])
    eventually(
        lambda: pipeline.db["turns"].count_documents({"user_id": "cy"}),
        lambda n: n == 2,
        what="the first turns projected",
    )
    window = pipeline.pipeline.processes["window"]
    time.sleep(2)  # the worker commits what it applied
    window.stop()
    pipeline.record("cy", "s", [{"role": "user", "content": f"late {i}"} for i in range(2)])
    commit_window_past(pipeline, "late 0")
    window.start()
    pipeline.pipeline.wait_ready(180, ["window"])
    pipeline.flush("cy", "s")

    snapshots = eventually(
        lambda: promoted_contents(pipeline, "cy"), lambda s: len(s) == 1, what="the snapshot"
    )
    assert snapshots == [["early 0", "early 1", "late 0", "late 1"]]


def test_a_last_turn_the_consumer_committed_past_is_read_back(pipeline_factory: Any) -> None:
    """No record follows the skipped one: the commit beyond the progress gives it away."""
    pipeline: PipelineHarness = pipeline_factory(MEMSTREAM_MAX_MESSAGES="10")
    window = pipeline.pipeline.processes["window"]
    window.stop()
    pipeline.record("di", "s", [{"role": "user", "content": "only turn"}])
    commit_window_past(pipeline, "only turn")
    window.start()
    pipeline.pipeline.wait_ready(180, ["window"])

    snapshots = eventually(
        lambda: pipeline.snapshots(user_id="di"), lambda s: len(s) == 1, what="an idle snapshot"
    )
    assert snapshots[0]["reason"] == "idle"
    assert promoted_contents(pipeline, "di") == [["only turn"]]


def test_extraction_worker_killed_duplicates_no_memory(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory()
    pipeline.llm.on("Stripe", STRIPE_FACTS, scope="last_user")
    pipeline.record("bob", "s", [{"role": "user", "content": "I work at Stripe."}])
    pipeline.flush("bob", "s")
    eventually(lambda: pipeline.memories(user_id="bob"), lambda m: len(m) == 1, what="a memory")
    pipeline.pipeline.restart("extract:semantic", kill=True)
    pipeline.pipeline.restart("projector", kill=True)
    pipeline.record("bob", "s", [{"role": "user", "content": "Still at Stripe."}])
    pipeline.flush("bob", "s")
    eventually(lambda: pipeline.snapshots(user_id="bob"), lambda s: len(s) == 2, what="2 snapshots")
    (memory,) = eventually(
        lambda: pipeline.memories(user_id="bob"),
        lambda m: len(m) == 1 and m[0]["reinforcement_count"] == 1,
        what="one memory, restated by the second snapshot",
    )
    assert len(memory["evidence"]) == 2
    # The log entry is written after the view (projections/memories.py): waited for.
    eventually(
        lambda: sorted(
            e["event_type"] for e in pipeline.db["memory_events"].find({"user_id": "bob"})
        ),
        lambda kinds: kinds == ["MemoryAdded", "MemoryReinforced"],
        timeout=10,
        what="the added and the reinforced event in memory_events, once each",
    )


def test_bad_input_is_dead_lettered_and_processing_goes_on(pipeline_factory: Any) -> None:

    from aiokafka import AIOKafkaProducer

    pipeline: PipelineHarness = pipeline_factory()

    async def produce_garbage() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=pipeline.settings.kafka.bootstrap_servers)
        await producer.start()
        try:
            topic = pipeline.settings.kafka.topics.turns
            await producer.send_and_wait(topic, b"not json at all", key=b"eve|s")
            bad_role = {
                "event_id": "bad-role",
                "event_type": "TurnRecorded",
                "schema_version": 1,
                "occurred_at": "2026-01-01T00:00:00Z",
                "recorded_at": "2026-01-01T00:00:00Z",
                "user_id": "eve",
                "session_id": "s",
                "role": "robot",
                "content": "beep",
            }
            await producer.send_and_wait(topic, json.dumps(bad_role).encode(), key=b"eve|s")
        finally:
            await producer.stop()

    asyncio.run(produce_garbage())
    pipeline.record("eve", "s", [{"role": "user", "content": "I work at Stripe."}])
    pipeline.flush("eve", "s")

    letters = eventually(
        lambda: list(pipeline.db["dead_letters"].find()),
        lambda d: len(d) == 2,
        what="two dead letters",
    )
    reasons = " | ".join(letter["reason"] for letter in letters)
    assert "not JSON" in reasons and "role" in reasons
    assert all(letter["stage"] == "window" for letter in letters)
    snapshots = eventually(
        lambda: pipeline.snapshots(user_id="eve"),
        lambda s: len(s) == 1,
        what="the good turn's snapshot",
    )
    assert snapshots[0]["turn_count"] == 1


def test_invalid_llm_output_is_retried_then_dead_lettered(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory()
    pipeline.llm.on("Stripe", "this is not json")  # also matches the retries
    pipeline.record("fay", "s", [{"role": "user", "content": "I work at Stripe."}])
    pipeline.flush("fay", "s")
    letters = eventually(
        lambda: list(pipeline.db["dead_letters"].find()),
        lambda d: len(d) == 1,
        what="a dead letter",
    )
    assert letters[0]["stage"] == "extract-semantic"
    assert "invalid LLM output" in letters[0]["reason"]
    assert len(pipeline.llm.chat_requests) == 3  # the configured attempts
    (snapshot,) = eventually(
        lambda: pipeline.snapshots(user_id="fay"),
        lambda s: len(s) == 1 and "extractions" in s[0],
        what="the extraction recorded on the snapshot",
    )
    assert "invalid LLM output" in snapshot["extractions"]["semantic"]["failure"]
    assert pipeline.memories(user_id="fay") == []


TIM_AND_JOHN = [
    {"role": "user", "name": "Tim", "content": "I work at Stripe and I like coffee."},
    {"role": "assistant", "name": "John", "content": "I am a nurse in Berlin. I like coffee too."},
    {"role": "assistant", "content": "Nice to meet you both!"},
]
TIM_AND_JOHN_FACTS = {
    "facts": [
        # What a careless model may answer: John's facts arrive with owner agent (he spoke as
        # role=assistant) and with his job as a profile field; the pipeline must correct both.
        {
            "subject": "Tim",
            "statement": "Tim works at Stripe.",
            "owner": "user",
            "category": "work",
            "profile_field": "employer",
        },
        {
            "subject": "the user",
            "statement": "The user likes coffee.",
            "owner": "user",
            "category": "preference",
        },
        {
            "subject": "John",
            "statement": "John is a nurse in Berlin.",
            "owner": "agent",
            "category": "work",
            "profile_field": "occupation",
        },
        {
            "subject": "John",
            "statement": "John likes coffee.",
            "owner": "agent",
            "category": "preference",
        },
    ]
}


def test_multi_speaker_facts_keep_their_subjects_and_owners(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory()
    pipeline.llm.on("[John]: I am a nurse in Berlin.", TIM_AND_JOHN_FACTS)
    pipeline.record("tim", "party", TIM_AND_JOHN)
    pipeline.flush("tim", "party")

    memories = eventually(
        lambda: pipeline.memories(user_id="tim"), lambda m: len(m) == 4, what="four memories"
    )
    found = {(m["subject"], m["owner"], m["text"]) for m in memories}
    assert found == {
        ("the user", "user", "The user works at Stripe."),
        ("the user", "user", "The user likes coffee."),
        ("John", "user", "John is a nurse in Berlin."),
        ("John", "user", "John likes coffee."),
    }
    # The LLM saw the rendered multi-speaker conversation, the user's name once at the top.
    prompt = pipeline.llm.chat_requests[0]["messages"][-1]["content"]
    assert "The user's name is Tim\n[user]: I work at Stripe" in prompt
    assert "[John]: I am a nurse in Berlin." in prompt
    assert "[assistant]: Nice to meet you both!" in prompt
    # Raw history (L1_RAW) is stored in the same rendered format.
    (snapshot,) = pipeline.snapshots(user_id="tim")
    assert snapshot["raw_history"].splitlines()[:2] == [
        "The user's name is Tim",
        "[user]: I work at Stripe and I like coffee.",
    ]
    # The L0 profile is Tim's alone: his name and employer, never John's job or city.
    profile = eventually(
        lambda: pipeline.db["profiles"].find_one({"_id": "tim"}),
        lambda p: p is not None and "employer" in p["fields"],
        what="profile",
    )
    assert profile is not None
    assert profile["fields"]["name"]["value"] == "Tim"
    assert profile["fields"]["employer"]["value"] == "The user works at Stripe."
    assert set(profile["fields"]) == {"name", "employer"}
    assert pipeline.db["profiles"].count_documents({}) == 1
    # Short-term memory read back from L1_RAW for a prompt: other speakers cut, the user whole.
    from memstream.sdk.sync_client import SyncMemoryClient

    client = SyncMemoryClient(pipeline.settings)
    history = client.session_history("tim", "party", max_chars_per_message=12).splitlines()
    assert history[:2] == ["The user's name is Tim", "[user]: I work at Stripe and I like coffee."]
    assert history[2].startswith("[John]: I am a nurs") and history[2].endswith("…")
    assert history[3] == "[assistant]: Nice to mee…"  # 11 characters and the marker
    client.close()
