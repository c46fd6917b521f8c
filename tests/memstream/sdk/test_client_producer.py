"""The SDK producer is idempotent where the broker allows it, and works where it does not."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from aiokafka.errors import KafkaError

from memstream.config import load_settings
from memstream.sdk.client import MemoryClient

pytestmark = pytest.mark.integration


def settings(broker: Any, mode: str) -> Any:
    return load_settings(
        environ={
            "MEMSTREAM_CONFIG": "/dev/null",
            "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
            "MEMSTREAM_TOPIC_PREFIX": f"p{uuid.uuid4().hex[:8]}.",
            "MEMSTREAM_IDEMPOTENT_PRODUCER": mode,
            "MEMSTREAM_SEAL_CONTENT": "false",  # the producer alone: no database for keys
        }
    )


def record_one(broker: Any, mode: str) -> int:
    async def send() -> int:
        async with MemoryClient(settings(broker, mode)) as client:
            turns = await client.record("u1", "s1", [{"role": "user", "content": "hello"}])
            return len(turns)

    return asyncio.run(send())


def test_auto_records_turns_on_every_broker(broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    assert record_one(broker, "auto") == 1
    assert not [r for r in caplog.records if "InitProducerId" in r.getMessage()]


def test_on_insists_on_idempotence(broker: Any) -> None:
    if broker.flavour == "tansu":  # no producer ids: refused, not silently downgraded
        with pytest.raises(KafkaError):
            record_one(broker, "on")
    else:
        assert record_one(broker, "on") == 1
