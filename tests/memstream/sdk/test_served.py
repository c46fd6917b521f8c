"""`ServedReadModels`: an SDK client reads the read model the deployment serves, looked up again
after `RECHECK_SECONDS`, every database's read model on one connection pool."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pymongo import MongoClient

from handlers.serving import Served
from memstream.config import Settings, load_settings
from memstream.promotion.pointer import write_served
from memstream.sdk.served import RECHECK_SECONDS, ServedReadModels

pytestmark = pytest.mark.integration


@pytest.fixture
def deployment(mongo: Any) -> Iterator[tuple[Settings, MongoClient[dict[str, Any]], str]]:
    """The live database holding tim's memory "live", and a shadow's holding "shadow"."""
    live, shadow = (f"served_{uuid.uuid4().hex[:8]}_{side}" for side in ("live", "shadow"))
    client: MongoClient[dict[str, Any]] = MongoClient(mongo.uri, tz_aware=True)
    for database, text in ((live, "live"), (shadow, "shadow")):
        client[database]["memories"].insert_one(
            {
                "_id": f"{text}-1",
                "user_id": "tim",
                "status": "current",
                "text": text,
                "created_at": datetime(2026, 12, 5, tzinfo=UTC),
            }
        )
    settings = load_settings(environ={"MONGODB_URI": mongo.uri, "MONGODB_DATABASE": live})
    yield settings, client, shadow
    for database in (live, shadow):
        client.drop_database(database)
    client.close()


def test_reads_follow_a_promotion_after_the_recheck_on_one_connection_pool(
    deployment: tuple[Settings, MongoClient[dict[str, Any]], str],
) -> None:
    settings, client, shadow = deployment
    now = [0.0]
    served = ServedReadModels(settings, clock=lambda: now[0])

    async def texts() -> list[str]:
        model = await served.read_model()
        return [m["text"] for m in await model.memories("tim")]

    async def run() -> tuple[list[str], list[str], list[str]]:
        before = await texts()
        await (await served.read_model()).close()  # on the shared pool: it stays open
        again = await texts()
        write_served(client[settings.mongodb.database], Served(1, shadow, "default"))
        cached = await texts()  # within RECHECK_SECONDS: the last look stands
        now[0] += RECHECK_SECONDS
        after = await texts()
        await served.close()
        return before + again, cached, after

    assert asyncio.run(run()) == (["live", "live"], ["live"], ["shadow"])
