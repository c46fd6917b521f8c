"""The broker refusing every send for a while: the stages wait it out, nothing is dead-lettered.

A dedicated broker advertises a fault proxy (`tests.support.faults`); `block_produce()` drops
every Produce request while fetches, commits and heartbeats pass, so the window reads the turns
and fails to send their snapshot — the exact case that used to dead-letter the turn.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from events import encode
from tests import factories as f
from tests.factories import STRIPE_FACTS
from tests.support.faults import produce_direct, proxied_broker
from tests.support.pipeline import PipelineHarness, eventually
from tests.support.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.integration


def test_sends_refused_by_the_broker_are_retried_until_it_accepts_them(
    broker_flavour: str, mongo: Any, scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    scripted_llm.on("Stripe", STRIPE_FACTS, scope="last_user")
    with proxied_broker(broker_flavour, tmp_path / "broker") as (broker, proxy):
        run = uuid.uuid4().hex[:10]
        pipeline = PipelineHarness(
            broker=broker,
            mongo_uri=mongo.uri,
            llm=scripted_llm,
            run_id=run,
            log_dir=tmp_path / f"logs-{run}",
            environment={"MEMSTREAM_PRODUCER_REQUEST_TIMEOUT": "3"},
        ).start()
        try:
            turn = f.turn(user_id="gus", session_id="s", content="I work at Stripe.")
            flush = f.flush(user_id="gus", session_id="s")
            proxy.block_produce()
            topic = pipeline.settings.kafka.topics.turns
            records = [(b"gus|s", encode(turn)), (b"gus|s", encode(flush))]
            asyncio.run(produce_direct(broker.bootstrap_servers, topic, records, partition=0))
            eventually(
                lambda: proxy.stats().produce_blocked,
                lambda blocked: blocked >= 3,
                timeout=60,
                what="the window's snapshot send to be refused",
            )
            time.sleep(8)  # longer than the send timeout: the stage sees the failure
            assert pipeline.snapshots(user_id="gus") == []
            proxy.restore()

            (memory,) = eventually(
                lambda: pipeline.memories(user_id="gus"),
                lambda m: len(m) == 1,
                timeout=180,
                what="the memory after the broker accepted sends again",
            )
            assert memory["text"] == "The user works at Stripe."
            (snapshot,) = pipeline.snapshots(user_id="gus")
            assert snapshot["turn_ids"] == [turn.event_id]
            assert pipeline.db["dead_letters"].count_documents({}) == 0
            window_log = (pipeline.log_dir / "worker-window.log").read_text()
            assert "waiting" in window_log and f"sending snapshot {snapshot['_id']}" in window_log
        finally:
            pipeline.stop()
