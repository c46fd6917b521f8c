"""The short fault-injection profile (docs/architecture.md, "Fault injection"): the real pipeline
on Apache Kafka (the database outage on each broker), SecantusDB and the scripted LLM, with
workers SIGKILLed, the LLM failing, slow and garbling, and malformed records; the oracle finds
nothing lost and nothing doubled.

The long profile is `python -m bench.fault.run` (BENCHMARKS.md, "Fault injection").
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import psutil
import pytest

from memstream.config import load_settings
from memstream.promotion.lineage import shadow_environment
from memstream.runtime.servers import ApacheKafkaBroker, SecantusServer
from tests.support.brokers import only_on_the_durable_broker
from tests.support.fault import faults
from tests.support.fault import malformed as bad
from tests.support.fault.faults import Target
from tests.support.fault.oracle import Verdict, judge
from tests.support.fault.run import Outcome, observe, run_faults
from tests.support.fault.workload import Workload, generate
from tests.support.pipeline import eventually

pytestmark = pytest.mark.integration

SEED = 20261130
ON_APACHE_ONLY = (
    "what it shows is the stages' (at-least-once made idempotent), not the broker's; Tansu keeps "
    "the database-outage profile below and the rest of the suite"
)


def assert_nothing_lost_or_doubled(outcome: Outcome) -> None:
    assert outcome.verdict.ok, outcome.verdict.summary()


def test_kills_llm_faults_and_malformed_input_lose_and_double_nothing(
    broker: Any, mongo: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    only_on_the_durable_broker(
        request.config,
        broker.flavour,
        ON_APACHE_ONLY,
    )
    workload = generate(SEED, users=10, sessions_per_user=3, garbled_sessions=1)
    malformed = bad.generate(SEED, 200)
    outcome = run_faults(
        broker=broker,
        mongo_uri=mongo.uri,
        log_dir=tmp_path,
        seed=SEED,
        workload=workload,
        malformed=malformed,
        faults=[
            faults.kill_stage("window"),
            faults.llm_outage(6, "500"),
            faults.kill_after_result_sent(),
            faults.llm_garbage(6),
            faults.kill_after_projecting_a_result(),
        ],
        produce_seconds=30,
        settle_timeout=240,
    )
    assert_nothing_lost_or_doubled(outcome)
    summary = outcome.summary()
    assert summary["kills_survived"] == 3 and summary["outages_survived"] == 2
    assert summary["dead_letters"] >= 200


NOTE_TYPE = """\
memory:
  custom_types:
    note:
      description: A lasting fact about the user worth remembering.
      instructions: Record each fact the user states about themselves.
"""
"""A custom type for the fault run: its memories are the workload's statements, reconciled."""


def test_a_custom_type_under_kills_llm_faults_and_malformed_input_loses_and_doubles_nothing(
    broker: Any, mongo: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    only_on_the_durable_broker(request.config, broker.flavour, ON_APACHE_ONLY)
    workload = generate(SEED + 3, users=6, sessions_per_user=3, garbled_sessions=1)
    malformed = bad.generate(SEED + 3, 50)
    outcome = run_faults(
        broker=broker,
        mongo_uri=mongo.uri,
        log_dir=tmp_path,
        seed=SEED + 3,
        workload=workload,
        malformed=malformed,
        faults=[
            faults.kill_stage("extract:note"),
            faults.llm_garbage(6),
            faults.kill_after_result_sent("note"),
            faults.kill_after_projecting_a_result(),
        ],
        produce_seconds=20,
        settle_timeout=240,
        memory_type="note",
        config=NOTE_TYPE,
    )
    assert_nothing_lost_or_doubled(outcome)
    summary = outcome.summary()
    assert summary["kills_survived"] == 3 and summary["outages_survived"] == 1
    assert summary["dead_letters"] >= 50


def reextracted_with_a_kill(target: Target, outcome: Outcome, workload: Workload) -> Verdict:
    """`memstream reextract` of the settled run's log into a shadow, its extraction worker
    SIGKILLed once it has extracted a first snapshot; the oracle's verdict on the shadow."""
    harness = target.harness
    name = f"{harness.settings.mongodb.database}_shadow"
    shadow_db = harness.db.client[name]
    target.llm.latency = 0.5  # one snapshot after the other, slowly: time to kill mid-run
    run = psutil.Popen(
        [sys.executable, "-m", "memstream", "reextract", "--extractor", "v2", "--into", name],
        env={
            **os.environ,
            **harness.environment,
            "MEMSTREAM_DATA_DIR": str(harness.log_dir),
            "MEMSTREAM_LLM_MAX_IN_FLIGHT": "1",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        done_when_killed = eventually(
            lambda: shadow_db["snapshots"].count_documents(
                {"extractions.semantic": {"$exists": 1}}
            ),
            lambda done: done >= 1,
            timeout=180,
            what="a first snapshot re-extracted",
        )
        (worker,) = [c for c in run.children(recursive=True) if "extract:semantic" in c.cmdline()]
        worker.kill()  # its supervisor starts it again; it resumes from its offsets
        _, stderr = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, stderr
    lineage = shadow_environment(harness.settings, name, "v2")
    shadow = load_settings(environ={**harness.environment, **lineage})
    observed = observe(shadow_db, shadow.kafka, harness)
    assert done_when_killed < len(observed.snapshots) == len(outcome.observed.snapshots)
    return judge(workload, [], observed, turns_topic=shadow.kafka.topics.turns)


def test_a_shadow_stage_killed_mid_reextraction_loses_and_doubles_nothing(
    broker: Any, mongo: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    only_on_the_durable_broker(request.config, broker.flavour, ON_APACHE_ONLY)
    workload = generate(SEED + 5, users=6, sessions_per_user=3, garbled_sessions=1)
    outcome = run_faults(
        broker=broker,
        mongo_uri=mongo.uri,
        log_dir=tmp_path,
        seed=SEED + 5,
        workload=workload,
        malformed=[],
        faults=[],
        produce_seconds=10,
        settle_timeout=240,
        config="extractors:\n  v2: {}\n",
        afterwards=partial(reextracted_with_a_kill, workload=workload),
    )
    assert_nothing_lost_or_doubled(outcome)  # the live read model
    shadow: Verdict = outcome.afterwards
    assert shadow.ok, shadow.summary()


def test_two_workers_per_stage_killed_added_and_removed_under_load_lose_and_double_nothing(
    broker: Any, mongo: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Every busy stage runs as two workers of its consumer group (parallel extraction on, as
    always): workers SIGKILLed, one added and one removed under load (rebalances), the LLM
    down and the extractor killed between a result and its progress."""
    only_on_the_durable_broker(
        request.config,
        broker.flavour,
        ON_APACHE_ONLY,
    )
    workload = generate(SEED + 3, users=10, sessions_per_user=3, garbled_sessions=1)
    outcome = run_faults(
        broker=broker,
        mongo_uri=mongo.uri,
        log_dir=tmp_path,
        seed=SEED + 3,
        workload=workload,
        malformed=bad.generate(SEED + 3, 50),
        faults=[
            faults.kill_any_worker(),
            faults.add_worker("extract:semantic"),
            faults.llm_outage(5, "500"),
            faults.kill_any_worker(),
            faults.remove_worker(),
            faults.kill_after_result_sent(),
        ],
        produce_seconds=40,
        settle_timeout=300,
        workers_per_stage=2,
    )
    assert_nothing_lost_or_doubled(outcome)
    summary = outcome.summary()
    assert summary["kills_survived"] == 3
    assert [f.get("added") or f.get("removed") for f in outcome.faults if f["fault"] == "rebalance"]


def test_a_database_outage_and_a_second_worker_killed_lose_and_double_nothing(
    broker: Any, tmp_path: Path
) -> None:
    workload = generate(SEED + 1, users=4, sessions_per_user=3, garbled_sessions=0)
    with SecantusServer(tmp_path / "db") as database:
        outcome = run_faults(
            broker=broker,
            mongo_uri=database.uri,
            log_dir=tmp_path,
            seed=SEED + 1,
            workload=workload,
            malformed=[],
            faults=[faults.second_worker_then_kill("window"), faults.database_outage(8)],
            produce_seconds=15,
            settle_timeout=240,
            database=database,
        )
    assert_nothing_lost_or_doubled(outcome)


def test_a_restarted_durable_broker_loses_and_doubles_nothing(
    broker_flavour: str, mongo: Any, tmp_path: Path
) -> None:
    if broker_flavour != "apache":
        pytest.skip("the embedded Tansu broker keeps its log in memory: a restart loses it")
    workload = generate(SEED + 2, users=4, sessions_per_user=3, garbled_sessions=0)
    with ApacheKafkaBroker(tmp_path / "broker") as own:
        own.flavour = "apache"  # type: ignore[attr-defined]
        outcome = run_faults(
            broker=own,
            mongo_uri=mongo.uri,
            log_dir=tmp_path,
            seed=SEED + 2,
            workload=workload,
            malformed=[],
            faults=[faults.broker_restart(5)],
            produce_seconds=15,
            settle_timeout=300,
            own_broker=True,
        )
    assert_nothing_lost_or_doubled(outcome)
