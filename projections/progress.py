"""How far the projector has applied each input partition, kept in the read model itself.

The projector records, per topic and partition, the offset of the last record whose effects it
wrote, after writing them (`store_progress`; a `$max`, so a late writer never moves it back).
Kept beside the views it describes — as a projection records its tracking position with the
view update — it tells the memory types' stages which of their own decisions the read model
already holds (docs/architecture.md, "Reconciliation"), and a projector pointed at an empty
database finds no progress there and projects the log again from its start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pymongo import UpdateOne

from projections.store import PROJECTOR_PROGRESS, Db


def progress_id(topic: str, partition: int) -> str:
    return f"{topic}|{partition}"


def projected_offsets(db: Db, topic: str, partitions: Iterable[int]) -> dict[int, int | None]:
    """The last projected offset of each of `topic`'s `partitions` (None: nothing yet)."""
    wanted = {progress_id(topic, partition): partition for partition in partitions}
    found = {
        wanted[document["_id"]]: int(document["offset"])
        for document in db[PROJECTOR_PROGRESS].find({"_id": {"$in": list(wanted)}})
    }
    return {partition: found.get(partition) for partition in wanted.values()}


def topic_offsets(db: Db, topic: str) -> dict[int, int]:
    """The last projected offset of every partition of `topic` the read model has progress for."""
    return {
        int(document["partition"]): int(document["offset"])
        for document in db[PROJECTOR_PROGRESS].find({"topic": topic})
    }


def store_progress(db: Db, offsets: Mapping[tuple[str, int], int]) -> None:
    """Record the last applied offset of each (topic, partition), never moving one back."""
    if not offsets:
        return
    db[PROJECTOR_PROGRESS].bulk_write(
        [
            UpdateOne(
                {"_id": progress_id(topic, partition)},
                {
                    "$max": {"offset": offset},
                    "$setOnInsert": {"topic": topic, "partition": partition},
                },
                upsert=True,
            )
            for (topic, partition), offset in offsets.items()
        ],
        ordered=False,
    )
