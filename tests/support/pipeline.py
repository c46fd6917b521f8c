"""A whole pipeline for an integration test: stage processes, an SDK client, the read model."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pymongo import MongoClient
from pymongo.database import Database
from pymongo.errors import OperationFailure

from memstream.config import Settings, load_settings
from memstream.runtime import TANSU_ENVIRONMENT, Pipeline, pipeline_stages
from memstream.topics import ensure_topics
from tests.support.scripted_llm import ScriptedLLM

T = TypeVar("T")

TEST_WINDOW = {
    "MEMSTREAM_MAX_MESSAGES": "4",
    "MEMSTREAM_IDLE_TIMEOUT": "3",
    "MEMSTREAM_IDLE_CHECK_INTERVAL": "0.5",
}
APACHE_ENVIRONMENT = {"MEMSTREAM_SESSION_TIMEOUT": "6", "MEMSTREAM_HEARTBEAT_INTERVAL": "1"}


class PipelineHarness:
    """Stage workers started as child processes against a test broker, database and LLM."""

    def __init__(
        self,
        *,
        broker: Any,
        mongo_uri: str,
        llm: ScriptedLLM,
        run_id: str,
        log_dir: Path,
        environment: dict[str, str],
    ) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / "test-config.yaml").write_text("# settings come from the environment\n")
        flavour_environment = TANSU_ENVIRONMENT if broker.flavour == "tansu" else APACHE_ENVIRONMENT
        self.environment = {
            "MEMSTREAM_CONFIG": str(log_dir / "test-config.yaml"),
            "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
            "MONGODB_URI": mongo_uri,
            "MONGODB_DATABASE": f"test_{run_id}",
            "MEMSTREAM_TOPIC_PREFIX": f"t{run_id}.",
            "MEMSTREAM_GROUP_PREFIX": f"g{run_id}-",
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "test",
            "MEMSTREAM_LLM_MODEL": llm.model,
            "MEMSTREAM_EMBEDDING_PROVIDER": "openai",
            "MEMSTREAM_EMBEDDING_MODEL": llm.embedding_model,
            **flavour_environment,
            **TEST_WINDOW,
            **environment,
        }
        self.settings: Settings = load_settings(environ=self.environment)
        self.llm = llm
        self.log_dir = log_dir
        self.pipeline = Pipeline(pipeline_stages(self.settings), self.environment, log_dir)
        self._mongo: MongoClient[dict[str, Any]] = MongoClient(mongo_uri, tz_aware=True)

    @property
    def db(self) -> Database[dict[str, Any]]:
        return self._mongo[self.settings.mongodb.database]

    def start(self) -> PipelineHarness:
        asyncio.run(ensure_topics(self.settings.kafka))
        self.pipeline.start(timeout=180)
        return self

    def stop(self) -> None:
        self.pipeline.stop()
        self._mongo.close()

    def record(self, user_id: str, session_id: str, messages: list[dict[str, Any]]) -> None:
        asyncio.run(self._record(user_id, session_id, messages))

    def flush(self, user_id: str, session_id: str) -> None:
        asyncio.run(self._flush(user_id, session_id))

    async def _record(self, user_id: str, session_id: str, messages: list[dict[str, Any]]) -> None:
        from memstream.client import MemoryClient

        async with MemoryClient(self.settings) as client:
            await client.record(user_id, session_id, messages)

    async def _flush(self, user_id: str, session_id: str) -> None:
        from memstream.client import MemoryClient

        async with MemoryClient(self.settings) as client:
            await client.flush(user_id, session_id)

    def snapshots(self, **query: Any) -> list[dict[str, Any]]:
        return list(self.db["snapshots"].find(query).sort([("session_id", 1), ("seq", 1)]))

    def memories(self, **query: Any) -> list[dict[str, Any]]:
        return list(self.db["memories"].find(query).sort("text", 1))

    def log_tails(self) -> str:
        return "\n".join(
            f"--- {stage}\n{process.log_tail(40)}"
            for stage, process in self.pipeline.processes.items()
        )


def eventually(
    probe: Callable[[], T], check: Callable[[T], bool], *, timeout: float = 60.0, what: str = ""
) -> T:
    """Poll `probe()` until `check` accepts its value; fail with the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except OperationFailure:  # SecantusDB (beta) answers "internal error" under load
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
            continue
        if check(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}: {value!r}")
        time.sleep(0.2)
