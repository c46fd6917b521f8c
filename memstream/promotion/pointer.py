"""The served lineage as the deployment's database holds it: one document (`served`) in the
`serving` collection, the fold of the serving topic (`memstream.promotion.switches`). Readers
(the SDK, the HTTP API, MCP) and the live stages' workers look it up here; only a fold writes it,
and a write never takes it back to an older version."""

from __future__ import annotations

from typing import Any

from pymongo import MongoClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from handlers.serving import LIVE, Served
from memstream.config import Settings
from memstream.promotion.lineage import deployment_database

COLLECTION = "serving"
POINTER_ID = "served"

Document = dict[str, Any]


def served_from(document: Document | None) -> Served:
    """The served lineage a pointer document holds (none yet: the live one)."""
    if document is None:
        return LIVE
    return Served(
        version=int(document["version"]),
        shadow=document.get("shadow"),
        extractor=document.get("extractor"),
        replaced_shadow=document.get("replaced_shadow"),
        replaced_extractor=document.get("replaced_extractor"),
        switch_id=document.get("switch_id"),
    )


def read_served(database: Database[Document]) -> Served:
    """The served lineage (the deployment's database)."""
    return served_from(database[COLLECTION].find_one({"_id": POINTER_ID}))


def look_up_served(settings: Settings, *, timeout: float | None = None) -> Served:
    """The served lineage, read once from the deployment's database with a client of its own
    (`timeout`: seconds to find the server; None: the driver's default)."""
    options: dict[str, Any] = {"tz_aware": True}
    if timeout is not None:
        options["serverSelectionTimeoutMS"] = int(timeout * 1000)
    client: MongoClient[Document] = MongoClient(settings.mongodb.uri, **options)
    try:
        return read_served(client[deployment_database(settings)])
    finally:
        client.close()


async def read_served_async(database: AsyncDatabase[Document]) -> Served:
    """`read_served` for an async client."""
    return served_from(await database[COLLECTION].find_one({"_id": POINTER_ID}))


def write_served(database: Database[Document], served: Served) -> bool:
    """Store `served` unless the pointer holds its version or a later one already; whether it
    was written (never before the first switch)."""
    if served.version == 0:
        return False
    fields = {
        "version": served.version,
        "shadow": served.shadow,
        "extractor": served.extractor,
        "replaced_shadow": served.replaced_shadow,
        "replaced_extractor": served.replaced_extractor,
        "switch_id": served.switch_id,
    }
    try:
        result = database[COLLECTION].update_one(
            {"_id": POINTER_ID, "version": {"$lt": served.version}},
            {"$set": fields},
            upsert=True,
        )
    except DuplicateKeyError:  # the pointer is at this version or later already
        return False
    return result.modified_count > 0 or result.upserted_id is not None
