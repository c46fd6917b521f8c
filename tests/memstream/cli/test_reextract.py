"""`memstream reextract`: the live log's snapshots extracted again by another named extractor,
into a shadow read model — the live read model untouched, the shadow what a pipeline running
that extractor from the start would have made."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

import psutil
import pytest

from memstream.cli.replay import COMPARED, differences
from memstream.config import Settings
from memstream.promotion.lineage import ShadowRefused, shadow_environment
from memstream.sdk.client import MemoryClient
from tests.memstream.cli.test_memories import memstream
from tests.support.brokers import only_on_the_first_broker
from tests.support.pipeline import PipelineHarness, copy_turns, eventually

EXTRACTORS = """\
extractors:
  v2:
    llm_model: shadow-model
"""
SAID = "I moved to Lisbon last year and I teach maths at a school there."


def fact(statement: str) -> dict[str, Any]:
    return {
        "facts": [
            {
                "subject": "the user",
                "statement": statement,
                "owner": "user",
                "category": "basic_info",
                "profile_field": None,
            }
        ]
    }


LIVE = fact("The user lives in Lisbon.")
SHADOW = fact("The user teaches maths at a school in Lisbon.")


def by_extractor(body: dict[str, Any]) -> dict[str, Any]:
    """The live extractor's model finds where the user lives, v2's what the user does."""
    return SHADOW if body.get("model") == "shadow-model" else LIVE


def live_with_tims_memory(pipeline_factory: Any) -> PipelineHarness:
    """A live pipeline (extractor `default`, `v2` declared) once tim's first session is a
    memory: where he lives."""
    live: PipelineHarness = pipeline_factory(config=EXTRACTORS)
    live.llm.on("You extract facts", by_extractor)
    live.record("tim", "s1", [{"role": "user", "content": SAID}])
    live.flush("tim", "s1")
    eventually(lambda: live.memories(user_id="tim"), lambda m: len(m) == 1, what="live memory")
    return live


def read_model(pipeline: PipelineHarness, database: str | None = None) -> dict[str, list[Any]]:
    db = pipeline.db if database is None else pipeline.db.client[database]
    return {name: sorted(db[name].find(), key=lambda d: str(d["_id"])) for name in COMPARED}


@pytest.mark.integration
def test_reextraction_makes_the_shadow_a_fresh_pipeline_would_and_leaves_live_untouched(
    pipeline_factory: Any,
) -> None:
    live = live_with_tims_memory(pipeline_factory)
    before = read_model(live)

    shadow = f"{live.settings.mongodb.database}_v2"
    head, semantic = reextract(live, shadow)
    assert head.startswith(f"shadow {shadow} (extractor v2): done in ")
    assert head.endswith(", 1 current memories")
    assert semantic.startswith("semantic: 1 snapshots (0 failed), 1 LLM calls, ")

    (memory,) = live.db.client[shadow]["memories"].find()
    assert memory["text"] == "The user teaches maths at a school in Lisbon."
    assert memory["provenance"]["extractor"] == "v2"
    assert read_model(live) == before  # the live read model is never written

    fresh: PipelineHarness = pipeline_factory(
        config=EXTRACTORS, MEMSTREAM_EXTRACTOR="v2", started=False
    )
    copy_turns(live, fresh)
    fresh.start()
    eventually(lambda: fresh.memories(user_id="tim"), lambda m: len(m) == 1, what="fresh memory")
    assert differences(fresh.db, live.db.client[shadow]) == []

    compared = memstream(live, "compare", live.settings.mongodb.database, shadow, "--json")
    assert compared.returncode == 1, compared.stderr  # they differ
    (tim,) = json.loads(compared.stdout)["differences"]
    assert tim["changed"] == [
        ["The user lives in Lisbon.", "The user teaches maths at a school in Lisbon."]
    ]
    assert (tim["same"], tim["only_live"], tim["only_shadow"]) == (0, [], [])
    alike = memstream(live, "compare", fresh.settings.mongodb.database, shadow)
    assert alike.returncode == 0, alike.stdout


def reextract(live: PipelineHarness, shadow: str, *options: str) -> list[str]:
    command = ["reextract", "--extractor", "v2", "--into", shadow, *options]
    run = subprocess.run(
        [sys.executable, "-m", "memstream", *command],
        env={**os.environ, **live.environment, "MEMSTREAM_DATA_DIR": str(live.log_dir)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


@pytest.mark.integration
def test_a_forgotten_user_stays_forgotten_a_selection_extracts_its_users_and_discard_drops_it(
    pipeline_factory: Any, broker: Any, request: pytest.FixtureRequest
) -> None:
    only_on_the_first_broker(
        request.config,
        broker.flavour,
        "what it shows is the command's (which users, which databases), the same on every broker",
    )
    live: PipelineHarness = pipeline_factory(config=EXTRACTORS)
    live.llm.on("You extract facts", by_extractor)
    for user in ("tim", "ada", "bob"):
        live.record(user, "s1", [{"role": "user", "content": SAID}])
        live.flush(user, "s1")
    eventually(lambda: live.memories(), lambda m: len(m) == 3, what="three live memories")

    async def forget_ada() -> None:
        async with MemoryClient(live.settings) as client:
            await client.forget_user("ada", reason="asked")

    asyncio.run(forget_ada())
    eventually(lambda: live.memories(user_id="ada"), lambda m: m == [], what="ada forgotten")

    everyone = f"{live.settings.mongodb.database}_all"
    reextract(live, everyone)
    shadow = live.db.client[everyone]
    assert sorted(m["user_id"] for m in shadow["memories"].find()) == ["bob", "tim"]
    assert shadow["turns"].count_documents({"user_id": "ada"}) == 0
    assert shadow["snapshots"].count_documents({"user_id": "ada"}) == 0

    only_tim = f"{live.settings.mongodb.database}_tim"
    _, semantic = reextract(live, only_tim, "--users", "tim")
    assert semantic.startswith("semantic: 1 snapshots (0 failed), 1 LLM calls")
    assert [m["user_id"] for m in live.db.client[only_tim]["memories"].find()] == ["tim"]

    other = f"{live.settings.mongodb.database}_other"  # not a shadow: never dropped
    live.db.client[other]["things"].insert_one({"kept": True})
    refused = memstream(live, "discard", other, "--yes")
    assert refused.returncode == 1 and "is not a shadow" in refused.stderr
    assert other in live.db.client.list_database_names()

    planned = memstream(live, "discard", only_tim)
    assert planned.returncode == 1 and "nothing dropped" in planned.stdout
    assert f"shadow.{only_tim}.memories" in planned.stdout
    dropped = memstream(live, "discard", only_tim, "--yes")
    assert dropped.returncode == 0, dropped.stderr
    assert only_tim not in live.db.client.list_database_names()
    assert live.memories(user_id="tim")  # the live read model keeps its memories
    again = memstream(live, "reextract", "--extractor", "v2", "--into", only_tim)
    assert again.returncode == 1  # its groups would resume where the discarded one stopped
    assert "was discarded" in again.stderr and "choose another name" in again.stderr


@pytest.mark.integration
def test_a_shadow_stage_killed_mid_run_is_restarted_and_nothing_is_lost_or_doubled(
    pipeline_factory: Any, broker: Any, request: pytest.FixtureRequest
) -> None:
    only_on_the_first_broker(
        request.config,
        broker.flavour,
        "the fault suite kills a shadow stage mid-run on Apache Kafka "
        "(tests/fault/test_fault_injection.py)",
    )
    live: PipelineHarness = pipeline_factory(config=EXTRACTORS)
    live.llm.on("You extract facts", by_extractor)
    users = [f"user{n}" for n in range(6)]
    for user in users:
        live.record(user, "s1", [{"role": "user", "content": SAID}])
        live.flush(user, "s1")
    eventually(lambda: live.memories(), lambda m: len(m) == len(users), what="live memories")
    live.llm.latency = 1.0  # the shadow's extractions take a while: time to kill one
    name = f"{live.settings.mongodb.database}_crash"
    shadow = live.db.client[name]
    command = ["reextract", "--extractor", "v2", "--into", name]
    run = psutil.Popen(
        [sys.executable, "-m", "memstream", *command],
        env={
            **os.environ,
            **live.environment,
            "MEMSTREAM_DATA_DIR": str(live.log_dir),
            "MEMSTREAM_LLM_MAX_IN_FLIGHT": "1",  # one snapshot after the other
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        done_when_killed = eventually(
            lambda: shadow["snapshots"].count_documents({"extractions.semantic": {"$exists": 1}}),
            lambda done: done >= 1,
            what="a first snapshot re-extracted",
        )
        (worker,) = [
            child for child in run.children(recursive=True) if "extract:semantic" in child.cmdline()
        ]
        worker.kill()  # SIGKILL mid-run: the supervisor starts it again
        stdout, stderr = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, stderr
    assert done_when_killed < len(users)  # killed mid-run
    assert f"semantic: {len(users)} snapshots (0 failed), {len(users)} LLM calls" in stdout
    memories = list(shadow["memories"].find())
    assert sorted(m["user_id"] for m in memories) == users  # none lost, none doubled
    assert shadow["memory_events"].count_documents({}) == len(users)


@pytest.mark.integration
def test_a_following_shadow_extracts_new_sessions_and_forgets_with_the_live_one(
    pipeline_factory: Any,
) -> None:
    live = live_with_tims_memory(pipeline_factory)
    name = f"{live.settings.mongodb.database}_follow"
    shadow = live.db.client[name]
    command = ["reextract", "--extractor", "v2", "--into", name, "--follow"]
    following = subprocess.Popen(
        [sys.executable, "-m", "memstream", *command],
        env={**os.environ, **live.environment, "MEMSTREAM_DATA_DIR": str(live.log_dir)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(following.stderr or []), daemon=True)
    reader.start()
    try:
        eventually(lambda: "".join(said), lambda text: "caught up" in text, what="caught up")
        assert len(list(shadow["memories"].find({"user_id": "tim"}))) == 1
        live.record("ada", "s1", [{"role": "user", "content": SAID}])  # a new session, live
        live.flush("ada", "s1")
        (new,) = eventually(
            lambda: list(shadow["memories"].find({"user_id": "ada"})),
            lambda m: len(m) == 1,
            what="the new session extracted by the shadow too",
        )
        assert new["text"] == "The user teaches maths at a school in Lisbon."

        async def forget_ada() -> None:
            async with MemoryClient(live.settings) as client:
                await client.forget_user("ada", reason="asked")

        asyncio.run(forget_ada())
        eventually(
            lambda: (
                live.memories(user_id="ada"),
                list(shadow["memories"].find({"user_id": "ada"})),
            ),
            lambda both: both == ([], []),
            what="ada forgotten on both sides",
        )
        following.send_signal(signal.SIGTERM)
        following.wait(timeout=120)  # stderr is the reader's; stdout is a few lines
        stdout = following.stdout.read() if following.stdout else ""
    finally:
        if following.poll() is None:
            following.kill()
    reader.join(10)
    assert following.returncode == 0, "".join(said)
    assert stdout.startswith(f"shadow {name} (extractor v2): done in ")


def test_a_shadow_worker_is_refused_the_live_database() -> None:
    from memstream.cli.main import main

    with pytest.raises(SystemExit, match="live deployment's database"):
        main(["worker", "--stage", "extract:semantic", "--shadow", "memstream", "--extractor", "x"])


def test_a_shadow_is_refused_the_live_database_and_an_undeclared_extractor() -> None:
    settings = Settings.model_validate({"extractors": {"v2": {}}})
    with pytest.raises(ShadowRefused, match="live deployment's database"):
        shadow_environment(settings, "memstream", "v2")
    with pytest.raises(ShadowRefused, match="'v3' is not declared"):
        shadow_environment(settings, "shadow", "v3")
    with pytest.raises(ShadowRefused, match="not a shadow name"):
        shadow_environment(settings, "a b", "v2")


def test_a_shadow_reads_the_live_log_and_keys_and_writes_its_own_results_and_groups() -> None:
    settings = Settings.model_validate({"extractors": {"v2": {}}})
    assert shadow_environment(settings, "trial", "v2") == {
        "MEMSTREAM_EXTRACTOR": "v2",
        "MONGODB_DATABASE": "trial",
        "MEMSTREAM_KEYS_DATABASE": "memstream",
        "MEMSTREAM_GROUP_PREFIX": "memstream-shadow.trial.",
        "MEMSTREAM_RESULTS_TOPIC_PREFIX": "memstream.shadow.trial.",
    }
