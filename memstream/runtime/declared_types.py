"""A read model holding memories of a type the configuration no longer declares is refused.

Only a memory type's own stage forgets its memories (docs/architecture.md, "Forgetting"): were a
custom type's declaration removed while memories of it remain, its stage would no longer run,
a user's forget request would leave those memories, and its receipt would still say complete
(it counts the stages that run). So the projector's worker checks at start, before it projects
anything, and ends with the reason; the remedy is to declare the type again, out of
`memory.extraction.enabled` if it should not be extracted any more (docs/architecture.md,
"Custom memory types").
"""

from __future__ import annotations

import asyncio
from functools import partial

from memstream.config import ConfigError, Settings
from projections import ensure_indexes
from projections.store import Db, memory_types_held
from streams.retrying import through_outages


class UndeclaredMemoryTypes(ConfigError):
    """The read model holds memories of types the configuration does not declare."""


def undeclared_types(db: Db, settings: Settings) -> list[str]:
    """The memory types the read model holds that `settings` does not declare (the indexes are
    made first: the check reads the `memory_type` one)."""
    ensure_indexes(db)
    return memory_types_held(db, settings.memory.types)


async def refuse_undeclared_types(db: Db, settings: Settings) -> None:
    """`UndeclaredMemoryTypes` naming them, if any; a database outage is waited out."""
    found = await through_outages(
        partial(asyncio.to_thread, undeclared_types, db, settings), "checking the memory types"
    )
    if found:
        names = ", ".join(map(repr, found))
        raise UndeclaredMemoryTypes(
            f"the read model holds memories of the memory type {names}, which the configuration "
            "does not declare: declare it again under memory.custom_types (leave it out of "
            "memory.extraction.enabled to stop extracting it), so its stage can still forget "
            "those memories"
        )
