"""Forgetting that holds, through the whole pipeline on a real broker and database.

For each kind of forget: what the user said is in every read model before, and after the
erasure's receipt is complete nothing of it is left — not in turns, snapshots, memories, their
versions and events, the profile, search or a replay of the log into a fresh database — while
the user's other data and other users stay as they were.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import pytest
from aiokafka import AIOKafkaConsumer
from pymongo import MongoClient

from events.codec import EventDecodeError, decode
from handlers.sealed_events import opener
from handlers.sealing import KeyDestroyed
from memstream.cli.replay import kafka_events, replay
from memstream.sdk.client import MemoryClient
from memstream.sdk.results import ErasureReceipt
from tests.support.pipeline import PipelineHarness, eventually, read_topic
from tests.support.results import assert_conforms

pytestmark = pytest.mark.integration
T = TypeVar("T")

FACTS = {
    "Stripe": ("The user works at Stripe.", "work", "employer"),
    "Lisbon": ("The user lives in Lisbon.", "basic_info", "location"),
    "Berlin": ("The user lives in Berlin.", "basic_info", "location"),
    "chess": ("The user plays chess.", "hobbies", None),
}
READ_MODELS = ("turns", "snapshots", "memories", "memory_events", "profiles", "saves")


def fact(word: str) -> dict[str, Any]:
    text, category, field = FACTS[word]
    found: dict[str, Any] = {
        "subject": "the user",
        "statement": text,
        "owner": "user",
        "category": category,
    }
    if field:
        found["profile_field"] = field
    return {"facts": [found]}


def script(pipeline: PipelineHarness) -> None:
    for word in FACTS:
        pipeline.llm.on(word, fact(word), scope="last_user")


def with_client(pipeline: PipelineHarness, use: Callable[[MemoryClient], Awaitable[T]]) -> T:
    async def run() -> T:
        async with MemoryClient(pipeline.settings) as client:
            return await use(client)

    return asyncio.run(run())


def say(
    pipeline: PipelineHarness, user: str, session: str, *texts: str, flush: bool = True
) -> None:
    pipeline.record(user, session, [{"role": "user", "content": text} for text in texts])
    if flush:
        pipeline.flush(user, session)


def memory_texts(pipeline: PipelineHarness, user: str) -> list[str]:
    return sorted(m["text"] for m in pipeline.db["memories"].find({"user_id": user}))


def wait_for_memories(pipeline: PipelineHarness, user: str, texts: list[str]) -> None:
    eventually(
        lambda: memory_texts(pipeline, user),
        lambda found: found == sorted(texts),
        timeout=120,
        what=f"{user}'s memories {texts}",
    )


def wait_for_erasure(pipeline: PipelineHarness, request_id: str) -> dict[str, Any]:
    receipt: dict[str, Any] = eventually(
        lambda: with_client(pipeline, lambda c: c.erasure(request_id)) or {},
        lambda found: bool(found.get("complete")),
        timeout=120,
        what=f"erasure {request_id} complete",
    )
    assert_conforms(receipt, ErasureReceipt)
    return receipt


def everything_of(db: Any, user: str, names: tuple[str, ...] = READ_MODELS) -> str:
    """Every read-model document of `user` (in `names`), as one text to search for forgotten
    words."""
    documents = [
        document
        for name in names
        for document in db[name].find({"$or": [{"user_id": user}, {"_id": user}]})
    ]
    return orjson.dumps(documents, default=str).decode()


def searched(pipeline: PipelineHarness, user: str, query: str) -> list[str]:
    found = with_client(pipeline, lambda c: c.search(user, query, limit=10))
    return [m["text"] for m in found]


def replayed(pipeline: PipelineHarness) -> Any:
    """The read model rebuilt from the pipeline's topics into a fresh database."""
    client: MongoClient[dict[str, Any]] = MongoClient(pipeline.environment["MONGODB_URI"])
    target = client[f"test_replay_{uuid.uuid4().hex[:10]}"]
    events = kafka_events(pipeline.settings.kafka, keys=pipeline.key_ring())
    report = replay(events, target, show=False)
    assert report.collisions == []
    return target


def changelogs(pipeline: PipelineHarness) -> list[str]:
    """The stages' table changelog topics (the window's open turns, the known memories)."""

    async def listed() -> set[str]:
        consumer = AIOKafkaConsumer(bootstrap_servers=pipeline.settings.kafka.bootstrap_servers)
        await consumer.start()
        try:
            return set(await consumer.topics())
        finally:
            await consumer.stop()

    prefix = pipeline.settings.kafka.group_prefix
    return sorted(t for t in asyncio.run(listed()) if t.startswith(prefix) and "changelog" in t)


def raw_log(pipeline: PipelineHarness, *, tables: bool = False) -> list[Any]:
    """Every record of the pipeline's four topics (and with `tables`, of the stages' changelog
    topics), as the broker holds it."""
    topics = pipeline.settings.kafka.topics
    names = [topics.turns, topics.snapshots, topics.memories, topics.dead_letters]
    names += changelogs(pipeline) if tables else []
    servers, partitions = (
        pipeline.settings.kafka.bootstrap_servers,
        pipeline.settings.kafka.partitions,
    )
    return [
        record
        for name in names
        for record in asyncio.run(read_topic(servers, name, partitions))
        if record.value is not None
    ]


def opened_events(pipeline: PipelineHarness) -> tuple[list[dict[str, Any]], int]:
    """The log's events that still open with the pipeline's key store, as JSON, and how many
    records no longer open (their keys destroyed)."""
    ring, opened, forgotten = pipeline.key_ring(), [], 0
    for record in raw_log(pipeline):
        try:
            opened.append(decode(record.value, opener(ring)).model_dump(mode="json"))
        except KeyDestroyed:
            forgotten += 1
        except EventDecodeError:
            continue  # not an event (a test's poison)
    return opened, forgotten


def opened_log(pipeline: PipelineHarness) -> tuple[str, int]:
    """`opened_events` as one text to search for forgotten words."""
    opened, forgotten = opened_events(pipeline)
    return orjson.dumps(opened).decode(), forgotten


def keys_destroyed(receipt: dict[str, Any]) -> int:
    return sum(receipt.get("keys_destroyed", {}).values())


def test_the_log_holds_no_plaintext_content_and_forgotten_records_no_longer_open(
    pipeline_factory: Any,
) -> None:
    # A long idle timeout keeps session a3's turn open in the window (its changelog) while the
    # topics are read; the tests' short default promoted it midway on a loaded machine.
    pipeline: PipelineHarness = pipeline_factory(every_stage=True, MEMSTREAM_IDLE_TIMEOUT="600")
    script(pipeline)
    say(pipeline, "ann", "a1", "I work at Stripe.")
    say(pipeline, "ann", "a2", "I live in Lisbon.")
    pipeline.save("ann", "semantic", "The user likes green tea.")
    wait_for_memories(
        pipeline,
        "ann",
        ["The user likes green tea.", "The user lives in Lisbon.", "The user works at Stripe."],
    )
    say(pipeline, "ann", "a3", "I play chess in Lisbon.", flush=False)  # open in the window
    eventually(
        lambda: pipeline.db["turns"].count_documents({"session_id": "a3"}),
        lambda count: count == 1,
        what="the open turn projected",
    )
    assert any("session-windows" in t for t in changelogs(pipeline))
    assert any("extract-semantic-progress" in t for t in changelogs(pipeline))
    raw = b"".join(record.value for record in raw_log(pipeline, tables=True))
    assert b"AES-256-GCM" in raw
    for word in (b"Stripe", b"Lisbon", b"green tea", b"works at", b"lives in", b"chess"):
        assert word not in raw, word
    text, forgotten = opened_log(pipeline)
    assert "Stripe" in text and "green tea" in text and forgotten == 0

    receipt = wait_for_erasure(
        pipeline, with_client(pipeline, lambda c: c.forget_session("ann", "a1"))
    )
    assert keys_destroyed(receipt) >= 2  # the session's key and the memory's it taught
    text, forgotten = opened_log(pipeline)
    assert "Stripe" not in text, text[text.index("Stripe") - 2000 : text.index("Stripe") + 200]
    assert "Lisbon" in text and forgotten >= 2  # the turn and the snapshot
    assert b"Stripe" not in b"".join(record.value for record in raw_log(pipeline, tables=True))


def test_forgetting_a_session_erases_it_everywhere_and_keeps_the_rest(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(every_stage=True)
    script(pipeline)
    say(pipeline, "ann", "a1", "I work at Stripe.")
    say(pipeline, "ann", "a2", "I live in Lisbon.")
    say(pipeline, "bob", "b1", "I live in Berlin.")
    wait_for_memories(pipeline, "ann", ["The user lives in Lisbon.", "The user works at Stripe."])
    wait_for_memories(pipeline, "bob", ["The user lives in Berlin."])
    bob_before = everything_of(pipeline.db, "bob")
    assert "Stripe" in everything_of(pipeline.db, "ann")

    request_id = with_client(
        pipeline, lambda c: c.forget_session("ann", "a1", reason="the user asked")
    )
    receipt = wait_for_erasure(pipeline, request_id)

    left = everything_of(pipeline.db, "ann")
    assert "Stripe" not in left and "Lisbon" in left
    assert pipeline.db["turns"].count_documents({"session_id": "a1"}) == 0
    assert pipeline.db["snapshots"].count_documents({"session_id": "a1"}) == 0
    assert "employer" not in (pipeline.db["profiles"].find_one({"_id": "ann"}) or {})["fields"]
    assert not any("Stripe" in text for text in searched(pipeline, "ann", "Where does ann work?"))
    assert everything_of(pipeline.db, "bob") == bob_before
    assert receipt["kind"] == "session" and receipt["reason"] == "the user asked"
    assert "Stripe" not in orjson.dumps(receipt, default=str).decode()

    rebuilt = replayed(pipeline)
    assert "Stripe" not in everything_of(rebuilt, "ann")
    assert "Lisbon" in everything_of(rebuilt, "ann")


def test_forgetting_a_memory_erases_every_version_and_the_fact_is_learned_anew(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory()
    script(pipeline)
    say(pipeline, "ann", "a1", "I work at Stripe.")
    say(pipeline, "ann", "a2", "I play chess.")
    wait_for_memories(pipeline, "ann", ["The user plays chess.", "The user works at Stripe."])
    (stripe,) = pipeline.memories(user_id="ann", text="The user works at Stripe.")

    request_id = with_client(pipeline, lambda c: c.forget("ann", stripe["memory_id"]))
    wait_for_erasure(pipeline, request_id)
    assert memory_texts(pipeline, "ann") == ["The user plays chess."]
    assert pipeline.db["memory_events"].count_documents({"memory_id": stripe["memory_id"]}) == 0
    assert with_client(pipeline, lambda c: c.history("ann", stripe["memory_id"])) == []

    say(pipeline, "ann", "a3", "Still at Stripe, by the way.")  # reconciled without the old one
    wait_for_memories(pipeline, "ann", ["The user plays chess.", "The user works at Stripe."])
    (again,) = pipeline.memories(user_id="ann", text="The user works at Stripe.")
    assert again["memory_id"] != stripe["memory_id"] and again["version"] == 1

    rebuilt = replayed(pipeline)
    ids = {m["memory_id"] for m in rebuilt["memories"].find({"user_id": "ann"})}
    assert stripe["memory_id"] not in ids and again["memory_id"] in ids
    opened, _ = opened_events(pipeline)  # the conversation stays; the memory is shredded
    decided = {d["memory_id"] for event in opened for d in event.get("decisions", ())}
    assert stripe["memory_id"] not in decided and again["memory_id"] in decided


def test_forgetting_a_user_erases_open_turns_saves_and_profile_and_spares_others(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(every_stage=True, MEMSTREAM_IDLE_TIMEOUT="600")
    script(pipeline)
    say(pipeline, "ann", "a1", "I work at Stripe.")
    pipeline.save("ann", "semantic", "The user likes green tea.")
    say(pipeline, "ann", "a2", "I play chess.", flush=False)  # still open in the window
    say(pipeline, "bob", "b1", "I live in Berlin.")
    wait_for_memories(pipeline, "ann", ["The user likes green tea.", "The user works at Stripe."])
    wait_for_memories(pipeline, "bob", ["The user lives in Berlin."])
    eventually(
        lambda: pipeline.db["turns"].count_documents({"session_id": "a2"}),
        lambda count: count == 1,
        what="the open turn projected",
    )
    bob_before = everything_of(pipeline.db, "bob")

    request_id = with_client(pipeline, lambda c: c.forget_user("ann", reason="account closed"))
    receipt = wait_for_erasure(pipeline, request_id)
    assert everything_of(pipeline.db, "ann") == "[]"
    assert receipt["kind"] == "user"

    pipeline.flush("ann", "a2")  # the open turn was dropped: nothing left to promote
    say(pipeline, "ann", "a3", "I live in Lisbon.")  # new data after the forget is kept
    wait_for_memories(pipeline, "ann", ["The user lives in Lisbon."])
    assert pipeline.db["snapshots"].count_documents({"session_id": "a2"}) == 0
    assert "chess" not in everything_of(pipeline.db, "ann")
    assert everything_of(pipeline.db, "bob") == bob_before

    rebuilt = replayed(pipeline)
    text = everything_of(rebuilt, "ann")
    assert "Lisbon" in text
    assert not any(word in text for word in ("Stripe", "green tea", "chess"))
    opened, _ = opened_log(pipeline)  # the log itself: what is left opens no more
    assert not any(word in opened for word in ("Stripe", "green tea", "chess"))
    assert "Berlin" in opened and keys_destroyed(receipt) >= 4


def test_a_forget_racing_a_snapshot_in_flight_keeps_its_memories_from_ever_appearing(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(every_stage=True)
    asked, release = threading.Event(), threading.Event()

    def slow_answer(_request: Any) -> str:
        asked.set()
        release.wait(timeout=60)
        return orjson.dumps(fact("Stripe")).decode()

    pipeline.llm.on("Stripe", slow_answer, scope="last_user")
    say(pipeline, "ann", "a1", "I work at Stripe.")
    assert asked.wait(timeout=120), "the extraction never asked the LLM"
    request_id = with_client(pipeline, lambda c: c.forget_session("ann", "a1"))
    eventually(  # the window has said so on the snapshots topic: its snapshot is gone
        lambda: pipeline.db["snapshots"].count_documents({"session_id": "a1"}),
        lambda count: count == 0,
        what="the forgotten session's snapshot erased",
    )
    release.set()

    seen: list[str] = []

    def complete_without_the_memory() -> dict[str, Any]:
        seen.extend(memory_texts(pipeline, "ann"))
        return with_client(pipeline, lambda c: c.erasure(request_id)) or {}

    eventually(complete_without_the_memory, lambda r: bool(r.get("complete")), timeout=120)
    extracted = eventually(
        lambda: pipeline.db["memory_events"].count_documents({"user_id": "ann"}),
        lambda count: count == 0,
        what="no memory event for ann",
    )
    assert extracted == 0 and seen == []
    assert memory_texts(pipeline, "ann") == []
