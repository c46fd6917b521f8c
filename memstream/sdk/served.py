"""The read model an SDK client reads: the one the deployment serves (docs/architecture.md,
"Promotion"). Looked up in the deployment's database at the first read and again at most every
`RECHECK_SECONDS`, so a long-lived client (the HTTP API's, MCP's) follows `memstream promote`
within that time; one `ReadModel` per database read, kept until the client closes, all on one
connection pool (a shadow's database is on the deployment's server)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from pymongo import AsyncMongoClient

from handlers.serving import LIVE, Served
from memstream.config import Settings
from memstream.promotion.lineage import deployment_database, served_settings
from memstream.promotion.pointer import read_served_async
from memstream.sdk.read_model import ReadModel

RECHECK_SECONDS = 2.0


class ServedReadModels:
    """The served lineage's settings and read model, as of the last look (module doc)."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.monotonic) -> None:
        if not settings.mongodb.uri:
            raise ValueError("MONGODB_URI is not set (is `memstream up` running?)")
        self._deployment = settings
        self._clock = clock
        self._client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
            settings.mongodb.uri, tz_aware=True
        )
        self._served: Served = LIVE
        self._settings = settings
        self._looked_at = -math.inf
        self._models: dict[str, ReadModel] = {}

    async def settings(self) -> Settings:
        """The served lineage's settings: its database and results topics."""
        now = self._clock()
        if now - self._looked_at >= RECHECK_SECONDS:
            database = self._client[deployment_database(self._deployment)]
            served = await read_served_async(database)
            self._looked_at = now
            if served != self._served:
                self._served = served
                self._settings = served_settings(self._deployment, served)
        return self._settings

    async def read_model(self) -> ReadModel:
        """The served read model."""
        mongodb = (await self.settings()).mongodb
        model = self._models.get(mongodb.database)
        if model is None:
            model = ReadModel(mongodb.uri or "", mongodb.database, client=self._client)
            self._models[mongodb.database] = model
        return model

    async def close(self) -> None:
        for model in self._models.values():
            await model.close()
        self._models.clear()
        await self._client.close()
