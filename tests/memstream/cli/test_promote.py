"""`memstream promote`: a shadow's read model served in place of the live one, and its extractor
run live from then on; `--back` serves the live one again, whose stages catch up from the log
(docs/architecture.md, "Promotion")."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from events.codec import decode
from events.serving import ReadModelSwitched
from memstream.runtime.supervisor import Supervisor
from memstream.sdk.client import MemoryClient
from memstream.sdk.served import RECHECK_SECONDS
from tests.memstream.cli.test_memories import memstream
from tests.memstream.cli.test_reextract import SAID, live_with_tims_memory, reextract
from tests.support.pipeline import PipelineHarness, eventually, read_topic

pytestmark = pytest.mark.integration

LIVE_TEXT = "The user lives in Lisbon."
SHADOW_TEXT = "The user teaches maths at a school in Lisbon."
LINEAGE_STAGES = ["extract:semantic", "projector"]


def texts(client: MemoryClient, loop: asyncio.AbstractEventLoop, user: str) -> list[str]:
    return sorted(m["text"] for m in loop.run_until_complete(client.memories(user)))


def reinforced(db: Any, user: str) -> int:
    return sum(m["reinforcement_count"] for m in db["memories"].find({"user_id": user}))


def restarted_into_the_served(live: PipelineHarness) -> None:
    """Start again the live stages' workers that left for the newly served lineage (what
    `memstream up`'s supervisor does)."""
    supervisor = Supervisor(live.pipeline)
    eventually(
        lambda: (supervisor.check(), supervisor.state())[1],
        lambda state: all(state[stage]["restarts"] >= 1 for stage in LINEAGE_STAGES),
        timeout=60,
        what="the live stages' workers started again",
    )
    live.pipeline.wait_ready(180, LINEAGE_STAGES)


def assert_status_reports_the_served_shadow(live: PipelineHarness, shadow: str) -> None:
    """`memstream status` reports the lineage served: the shadow's read model, extractor and
    consumer groups (the window's as configured: it does not switch)."""
    report = json.loads(memstream(live, "status", "--json").stdout)
    assert report["served"] == {"read_model": shadow, "extractor": "v2", "version": 1}
    assert report["database"] == {"reachable": True, "database": shadow}
    topics = live.settings.kafka.topics
    lags = report["consumer_lag"]
    assert set(lags["window"]) == {topics.turns}
    prefix = f"{live.settings.kafka.topic_prefix}shadow.{shadow}."
    assert set(lags["projector"]) == {
        topics.turns,
        topics.snapshots,
        f"{prefix}memories",
        f"{prefix}dead-letters",
    }
    assert set(lags["extract:semantic"]) == {topics.snapshots}
    assert all(isinstance(lag, int) for stage in lags.values() for lag in stage.values())


def assert_operator_commands_read_the_served_shadow(live: PipelineHarness, shadow_db: Any) -> None:
    """`memstream query` and `memstream dlq list` read the served shadow's database."""
    memory = shadow_db["memories"].find_one({"user_id": "tim", "status": "current"})
    lineage = memstream(
        live, "query", "lineage", "--user", "tim", "--memory", memory["memory_id"], "--json"
    )
    assert lineage.returncode == 0, lineage.stderr
    assert [json.loads(row)["text"] for row in lineage.stdout.splitlines()] == [SHADOW_TEXT]
    shadow_db["dead_letters"].insert_one(
        {
            "_id": "letter-of-the-shadow",
            "stage": "extract:semantic",
            "dead_lettered_at": datetime.now(UTC),
            "reason": "a reason only the shadow has",
        }
    )
    listed = memstream(live, "dlq", "list")
    assert listed.returncode == 0, listed.stderr
    assert "a reason only the shadow has" in listed.stdout
    shadow_db["dead_letters"].delete_one({"_id": "letter-of-the-shadow"})


def test_promote_switches_reads_and_the_live_extractor_and_back_restores_both(
    pipeline_factory: Any,
) -> None:
    live = live_with_tims_memory(pipeline_factory)
    shadow = f"{live.settings.mongodb.database}_v2"
    reextract(live, shadow)
    shadow_db = live.db.client[shadow]

    loop = asyncio.new_event_loop()
    client = MemoryClient(live.settings)  # a long-lived reader, like the HTTP API's
    loop.run_until_complete(client.start())
    try:
        assert texts(client, loop, "tim") == [LIVE_TEXT]

        promoted = memstream(live, "promote", shadow, "--reason", "v2 finds more", "--json")
        assert promoted.returncode == 0, promoted.stderr
        result = json.loads(promoted.stdout)
        assert (result["version"], result["shadow"], result["extractor"]) == (1, shadow, "v2")
        assert result["replaced"] == live.settings.mongodb.database

        time.sleep(RECHECK_SECONDS)
        assert texts(client, loop, "tim") == [SHADOW_TEXT]
        again = memstream(live, "promote", shadow)
        assert again.returncode == 1 and "served already" in again.stderr, again.stderr
        refused = memstream(live, "discard", shadow, "--yes")
        assert refused.returncode == 1 and "is served" in refused.stderr, refused.stderr

        # The live stages' workers leave for the shadow's lineage: a new session is extracted
        # by v2 into the shadow, and nothing of it reaches the live read model.
        restarted_into_the_served(live)
        asked = len(live.llm.chat_requests)
        live.record("tim", "s2", [{"role": "user", "content": SAID}])
        live.flush("tim", "s2")
        eventually(lambda: reinforced(shadow_db, "tim"), lambda n: n == 1, what="v2 reinforced")
        models = {r.get("model") for r in live.llm.chat_requests[asked:]}
        assert models == {"shadow-model"}
        assert reinforced(live.db, "tim") == 0
        assert live.db["snapshots"].count_documents({"session_id": "s2"}) == 0
        assert_status_reports_the_served_shadow(live, shadow)
        assert_operator_commands_read_the_served_shadow(live, shadow_db)

        back = memstream(live, "promote", "--back")
        assert back.returncode == 0, back.stderr
        database = live.settings.mongodb.database
        assert back.stdout.splitlines() == [
            f"serving: the live read model {database}, extractor default (version 2)",
            f"replaced: the shadow {shadow}, extractor v2",
            "the live stages' workers restart into it; switch again with `memstream promote"
            " --back`",
        ]
        time.sleep(RECHECK_SECONDS)
        assert texts(client, loop, "tim") == [LIVE_TEXT]

        # Back in the live lineage, its stages resume where they stopped and catch up.
        restarted_into_the_served(live)
        eventually(lambda: reinforced(live.db, "tim"), lambda n: n == 1, what="live caught up")
        assert live.db["snapshots"].count_documents({"session_id": "s2"}) == 1
    finally:
        loop.run_until_complete(client.close())
        loop.close()

    records = asyncio.run(
        read_topic(
            live.settings.kafka.bootstrap_servers or "",
            live.settings.kafka.topics.serving,
            live.settings.kafka.partitions,
        )
    )
    switches = [decode(record.value) for record in records]
    assert [type(s) for s in switches] == [ReadModelSwitched, ReadModelSwitched]
    assert [(s.version, s.shadow, s.back) for s in switches] == [
        (1, shadow, False),
        (2, None, True),
    ]
    assert switches[0].reason == "v2 finds more"
