"""Nothing lost, nothing doubled: crashes at the worst moment, re-sent turns, outages.

Each test runs the whole pipeline on a real broker (Tansu and Apache Kafka) and SecantusDB.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from events import encode
from memstream.runtime.servers import SecantusServer
from tests import factories as f
from tests.factories import STRIPE_FACTS
from tests.support.pipeline import PipelineHarness, eventually, produce_raw

pytestmark = pytest.mark.integration


def fact(statement: str, field: str) -> dict[str, Any]:
    return {
        "facts": [
            {
                "subject": "the user",
                "statement": statement,
                "owner": "user",
                "category": "basic_info",
                "profile_field": field,
            }
        ]
    }


STRIPE = fact("The user works at Stripe.", "employer")
GOOGLE = fact("The user works at Google.", "employer")
LISBON = fact("The user lives in Lisbon.", "location")


def texts(pipeline: PipelineHarness, user_id: str) -> list[str]:
    return sorted(m["text"] for m in pipeline.memories(user_id=user_id))


def crashed_at_its_fault_point(pipeline: PipelineHarness) -> None:
    """Wait until the semantic extractor has stopped at `MEMSTREAM_FAULT_POINT`."""
    extractor = pipeline.pipeline.processes["extract:semantic"]
    eventually(
        lambda: extractor.running,
        lambda running: not running,
        timeout=120,
        what="the extractor to crash at its fault point",
    )


def restarted_without_the_fault(pipeline: PipelineHarness) -> None:
    """Start the crashed semantic extractor again, without its fault point, and wait for it."""
    extractor = pipeline.pipeline.processes["extract:semantic"]
    extractor.environment.pop("MEMSTREAM_FAULT_POINT")
    extractor.start()
    pipeline.pipeline.wait_ready(180, ["extract:semantic"])


def test_an_extractor_killed_between_its_result_and_its_progress_keeps_one_answer(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory(
        MEMSTREAM_FAULT_POINT="extraction.after_result_sent"
    )
    pipeline.llm.on("Stripe", STRIPE, scope="last_user", times=1)
    pipeline.llm.on("Stripe", GOOGLE, scope="last_user")  # what a re-extraction would say
    pipeline.llm.on("Lisbon", LISBON, scope="last_user")
    pipeline.record("cy", "s1", [{"role": "user", "content": "I work at Stripe."}])
    pipeline.flush("cy", "s1")

    crashed_at_its_fault_point(pipeline)
    restarted_without_the_fault(pipeline)
    pipeline.record("cy", "s2", [{"role": "user", "content": "I live in Lisbon."}])
    pipeline.flush("cy", "s2")

    eventually(lambda: texts(pipeline, "cy"), lambda t: len(t) >= 2, what="both memories")
    time.sleep(2)  # anything doubled would have arrived by now
    assert texts(pipeline, "cy") == ["The user lives in Lisbon.", "The user works at Stripe."]
    stripe_requests = [r for r in pipeline.llm.chat_requests if "Stripe" in str(r["messages"])]
    assert len(stripe_requests) == 1, "the restarted extractor asked the LLM again"
    (first,) = pipeline.snapshots(user_id="cy", session_id="s1")
    (stripe,) = pipeline.memories(user_id="cy", text="The user works at Stripe.")
    assert first["extractions"]["semantic"]["memory_ids"] == [stripe["memory_id"]]
    assert pipeline.db["dead_letters"].count_documents({}) == 0


def test_an_extractor_killed_between_a_failed_result_and_its_dead_letter_sends_it_on_restart(
    pipeline_factory: Any,
) -> None:
    """The result of a failed extraction is written before its dead letter: the restarted
    worker reads the snapshot again, finds the failed result written, and sends the dead letter
    it never sent (once in `dead_letters`, however often it is sent)."""
    pipeline: PipelineHarness = pipeline_factory(
        MEMSTREAM_FAULT_POINT="extraction.after_result_sent"
    )
    pipeline.llm.on("Stripe", "this is not json")  # every attempt: the extraction fails
    pipeline.record("eve", "s1", [{"role": "user", "content": "I work at Stripe."}])
    pipeline.flush("eve", "s1")

    crashed_at_its_fault_point(pipeline)
    assert pipeline.db["dead_letters"].count_documents({}) == 0
    asked = len(pipeline.llm.chat_requests)
    restarted_without_the_fault(pipeline)

    (letter,) = eventually(
        lambda: list(pipeline.db["dead_letters"].find()),
        lambda d: len(d) == 1,
        what="the failed extraction's dead letter",
    )
    assert letter["stage"] == "extract-semantic"
    assert letter["reason"].startswith("invalid LLM output (details sealed in result ")
    assert len(pipeline.llm.chat_requests) == asked, "the restarted extractor asked the LLM again"


def test_a_turn_sent_twice_is_promoted_once_and_a_mis_keyed_turn_is_nowhere(
    pipeline_factory: Any,
) -> None:
    """What a producer retry or a re-sent `kcat` line does: the same event twice."""
    pipeline: PipelineHarness = pipeline_factory()
    turns_topic = pipeline.settings.kafka.topics.turns
    once = f.turn(user_id="dee", session_id="s", content="I work at Stripe.")
    mis_keyed = f.turn(user_id="dee", session_id="s", content="Keyed to another session.")
    records = [
        (b"dee|s", encode(once), None),
        (b"dee|s", encode(once), None),
        (b"dee|other", encode(mis_keyed), None),
        (b"dee|s", encode(f.flush(user_id="dee", session_id="s")), None),
    ]
    asyncio.run(produce_raw(pipeline.settings.kafka.bootstrap_servers or "", turns_topic, records))

    (snapshot,) = eventually(
        lambda: pipeline.snapshots(user_id="dee"), lambda s: len(s) == 1, what="the snapshot"
    )
    assert snapshot["turn_ids"] == [once.event_id]
    (letter,) = eventually(
        lambda: list(pipeline.db["dead_letters"].find()),
        lambda d: len(d) == 1,
        what="a dead letter",
    )
    assert letter["stage"] == "window" and "record key b'dee|other'" in letter["reason"]
    time.sleep(1)
    assert [t["_id"] for t in pipeline.db["turns"].find({"user_id": "dee"})] == [once.event_id]


def test_an_llm_outage_is_waited_out_without_dead_letters(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory()
    pipeline.llm.on("Stripe", STRIPE, scope="last_user")
    pipeline.llm.stop()  # the LLM and the embedder refuse connections
    pipeline.record("eli", "s", [{"role": "user", "content": "I work at Stripe."}])
    pipeline.flush("eli", "s")
    eventually(lambda: pipeline.snapshots(user_id="eli"), lambda s: len(s) == 1, what="snapshot")
    time.sleep(5)  # the extractor keeps trying meanwhile
    assert "extractions" not in pipeline.snapshots(user_id="eli")[0]
    assert pipeline.db["dead_letters"].count_documents({}) == 0
    pipeline.llm.start()  # back on the same port

    eventually(
        lambda: texts(pipeline, "eli"),
        lambda t: t == ["The user works at Stripe."],
        timeout=120,
        what="the memory after the outage",
    )
    assert pipeline.db["dead_letters"].count_documents({}) == 0


def test_a_database_outage_is_waited_out_without_dead_letters(
    pipeline_factory: Any, tmp_path: Path
) -> None:
    with SecantusServer(tmp_path / "outage-db") as database:
        pipeline: PipelineHarness = pipeline_factory(MONGODB_URI=database.uri)
        pipeline.llm.on("Stripe", STRIPE, scope="last_user")
        pipeline.llm.on("Lisbon", LISBON, scope="last_user")
        pipeline.record("flo", "s1", [{"role": "user", "content": "I work at Stripe."}])
        pipeline.flush("flo", "s1")
        eventually(lambda: texts(pipeline, "flo"), lambda t: len(t) == 1, what="the first memory")

        # Recording seals the turn with its session's key, which the SDK makes in MongoDB, so
        # the turn is recorded first; the stages open and seal while the database is down.
        pipeline.record("flo", "s2", [{"role": "user", "content": "I live in Lisbon."}])
        database.stop()
        pipeline.flush("flo", "s2")
        time.sleep(6)  # the window and the extractor go on; the projector waits
        database.start()

        eventually(
            lambda: texts(pipeline, "flo"),
            lambda t: t == ["The user lives in Lisbon.", "The user works at Stripe."],
            timeout=180,
            what="the memory learned while the database was down",
        )
        turns = eventually(
            lambda: list(pipeline.db["turns"].find({"user_id": "flo"})),
            lambda t: len(t) == 2 and all(turn["snapshot_id"] for turn in t),
            what="both turns, linked to their snapshots",
        )
        assert len(turns) == 2
        assert pipeline.db["dead_letters"].count_documents({}) == 0
        # Before its database stops: closing a client of a stopped server waits 30 s for it.
        pipeline.discard()


def test_a_worker_stopped_mid_extraction_finishes_the_llm_call_and_writes_its_result(
    pipeline_factory: Any,
) -> None:
    """SIGTERM while a snapshot's LLM call is in flight: the worker drains (the call finishes,
    the result is written) before it exits, so the snapshot, read again after the restart
    (its progress was not committed), is found written and costs no second call."""
    pipeline: PipelineHarness = pipeline_factory(MEMSTREAM_DRAIN_SECONDS="30")
    pipeline.llm.on("Stripe", STRIPE_FACTS, scope="last_user")
    pipeline.llm.latency = 4.0
    pipeline.record("gus", "s1", [{"role": "user", "content": "I work at Stripe."}])
    pipeline.flush("gus", "s1")
    eventually(
        lambda: len(pipeline.llm.chat_requests),
        lambda asked: asked == 1,
        timeout=60,
        what="the extraction's LLM call to start",
    )
    worker = pipeline.pipeline.processes["extract:semantic"]
    worker.stop(timeout=40)
    assert worker.returncode == 0, worker.log_tail()
    assert "draining 1 records in flight" in worker.log_path.read_text()
    pipeline.llm.latency = 0.0
    worker.start()
    pipeline.pipeline.wait_ready(120, ["extract:semantic"])
    (memory,) = eventually(
        lambda: pipeline.memories(user_id="gus"),
        lambda found: len(found) == 1,
        timeout=60,
        what="the memory the drained call learned",
    )
    assert memory["text"] == "The user works at Stripe."
    time.sleep(3)  # the redelivered snapshot is seen as written
    assert len(pipeline.llm.chat_requests) == 1
