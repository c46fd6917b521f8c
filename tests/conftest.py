"""Shared fixtures: real brokers (Tansu and Apache Kafka), SecantusDB, the scripted LLM, pipelines.

`--brokers tansu,apache` picks the Kafka-protocol brokers the integration suite runs on (each
integration test runs once per broker); `MEMSTREAM_TEST_BROKERS` is the same as an environment
variable. Every pipeline gets fresh topics, consumer groups and a fresh database.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.brokers import chosen_brokers
from tests.support.pipeline import PipelineHarness
from tests.support.scripted_llm import ScriptedLLM

BROKERS = ("tansu", "apache")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--brokers",
        default=os.environ.get("MEMSTREAM_TEST_BROKERS", "tansu"),
        help="comma list of Kafka-protocol brokers for integration tests: tansu, apache",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`broker` (the shared broker fixture) and `broker_flavour` (just the name, for tests
    that start brokers of their own) run once per broker chosen with `--brokers`."""
    for name, indirect in (("broker", True), ("broker_flavour", False)):
        if name in metafunc.fixturenames:
            chosen = chosen_brokers(metafunc.config)
            unknown = set(chosen) - set(BROKERS)
            if unknown:
                raise pytest.UsageError(f"unknown brokers {sorted(unknown)}; known: {BROKERS}")
            metafunc.parametrize(name, chosen, indirect=indirect, scope="session")


@pytest.fixture(scope="session")
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A running Kafka-protocol broker of the requested flavour (one per session and flavour)."""
    from memstream.runtime.servers import ApacheKafkaBroker, TansuBroker

    workdir = tmp_path_factory.mktemp(f"broker-{request.param}")
    flavours: dict[str, Any] = {"tansu": TansuBroker, "apache": ApacheKafkaBroker}
    server = flavours[request.param](workdir)
    server.flavour = request.param
    with server:
        yield server


@pytest.fixture(scope="session")
def mongo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One SecantusDB server for the session; each test uses its own database."""
    from memstream.runtime.servers import SecantusServer

    with SecantusServer(tmp_path_factory.mktemp("secantus") / "data") as server:
        yield server


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as llm:
        yield llm


@pytest.fixture
def pipeline_factory(
    broker: Any, mongo: Any, scripted_llm: ScriptedLLM, tmp_path: Path
) -> Iterator[Callable[..., PipelineHarness]]:
    """Start the whole pipeline (one process per stage) on fresh topics, groups and database."""
    harnesses: list[PipelineHarness] = []

    def start(
        *, started: bool = True, every_stage: bool = False, config: str = "", **environment: str
    ) -> PipelineHarness:
        """A pipeline with `environment` on top of the test defaults; `started=False` leaves
        its workers to `harness.start()` (e.g. after copying records into its topics);
        `every_stage` runs the extraction stages of the types not enabled too (a session's or
        a user's erasure waits for them; `tests.support.pipeline.stage_needed`); `config` is
        its `project-config.yaml` (e.g. custom memory types: a mapping the environment cannot
        give)."""
        run = uuid.uuid4().hex[:10]
        harness = PipelineHarness(
            broker=broker,
            mongo_uri=mongo.uri,
            llm=scripted_llm,
            run_id=run,
            log_dir=tmp_path / f"logs-{run}",
            environment=environment,
            every_stage=every_stage,
            config=config,
        )
        harnesses.append(harness)
        return harness.start() if started else harness

    yield start
    for harness in harnesses:
        harness.discard()
