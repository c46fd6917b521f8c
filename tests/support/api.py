"""A running pipeline with the HTTP API in front of it, and its API keys."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstream.api.keys import KeyStore
from memstream.api.serving import ApiServer
from tests.support.pipeline import PipelineHarness
from tests.support.scripted_llm import ScriptedLLM

SERVICE_ACCOUNT = "svc-agent-1"


@dataclass
class ServedApi:
    pipeline: PipelineHarness
    server: ApiServer
    keys: dict[str, str]
    """`app` (any user), `acme` (users acme-*), `globex` (users globex-*), `svc` (the service
    account `SERVICE_ACCOUNT`)."""

    @property
    def url(self) -> str:
        return self.server.url

    def create_key(self, name: str, kind: str, principal_id: str, **options: Any) -> str:
        return asyncio.run(_create(self.pipeline, name, kind, principal_id, **options))

    def revoke(self, key: str) -> None:
        async def revoke() -> None:
            store = _store(self.pipeline)
            try:
                await store.revoke(key.split("_")[1])
            finally:
                await store.close()

        asyncio.run(revoke())

    def stored_keys(self) -> list[Any]:
        async def listed() -> list[Any]:
            store = _store(self.pipeline)
            try:
                return await store.list()
            finally:
                await store.close()

        return asyncio.run(listed())


def _store(pipeline: PipelineHarness) -> KeyStore:
    mongodb = pipeline.settings.mongodb
    return KeyStore(mongodb.uri or "", mongodb.database)


async def _create(
    pipeline: PipelineHarness, name: str, kind: str, principal_id: str, **options: Any
) -> str:
    store = _store(pipeline)
    try:
        key, _ = await store.create(name, kind, principal_id, **options)  # type: ignore[arg-type]
        return key
    finally:
        await store.close()


@contextmanager
def served_api(
    broker: Any, mongo: Any, llm: ScriptedLLM, log_dir: Path, **environment: str
) -> Iterator[ServedApi]:
    """The whole pipeline (fresh topics and database), the API on a free port, four keys."""
    run = uuid.uuid4().hex[:10]
    pipeline = PipelineHarness(
        broker=broker,
        mongo_uri=mongo.uri,
        llm=llm,
        run_id=run,
        log_dir=log_dir / f"logs-{run}",
        environment=environment,
        every_stage=True,  # the API's erasures wait for every type's stage
    )
    pipeline.start()
    try:
        with ApiServer(pipeline.settings) as server:
            keys = {
                "app": asyncio.run(_create(pipeline, "app", "application", "app-1")),
                "acme": asyncio.run(
                    _create(pipeline, "acme", "application", "acme", user_prefix="acme-")
                ),
                "globex": asyncio.run(
                    _create(pipeline, "globex", "application", "globex", user_prefix="globex-")
                ),
                "svc": asyncio.run(_create(pipeline, "svc", "service_account", SERVICE_ACCOUNT)),
            }
            yield ServedApi(pipeline, server, keys)
    finally:
        pipeline.discard()  # its topics and database are not used again: no clean stop needed
