"""A memory type's stage answering rollback requests (docs/architecture.md, "Rollback").

Wiring only: skip a request whose result is written already (kept as the stage's own, or
projected), read the memory's stored versions — the stage's own unprojected records first, then
the read model, as `streams.stage_memories.StageMemories.known` does — and its current version,
let `handlers.rollback` decide, write the one `MemoryRolledBack` record. A refusal is a record too
(`refused`), never a dead letter: the request is well formed, the memory just is not in a state
to roll back, and the caller reads why.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from events.memories import MemoryType, Provenance
from events.rollbacks import MemoryRollbackRequested, MemoryRolledBack
from handlers.known_memory import KnownMemory
from handlers.known_state import OwnRecord
from handlers.ports import StageReadModel
from handlers.rollback import (
    StoredVersion,
    rollback_decision,
    rollback_record,
    rollback_result_id,
    versions_in,
)
from streams.own_decisions import OwnDecisions

log = logging.getLogger(__name__)

Read = Callable[..., Awaitable[Any]]
"""A read-model call made in a thread, through outages
(`streams.stage_memories.StageMemories.read`)."""


async def roll_back(
    request: MemoryRollbackRequested,
    *,
    memory_type: MemoryType,
    own: OwnDecisions,
    read_model: StageReadModel,
    read: Read,
    known: Callable[[str], Awaitable[dict[str, KnownMemory]]],
    provenance: Provenance,
) -> MemoryRolledBack | None:
    """The record answering `request`; None when it is another type's or already answered."""
    if request.memory_type != memory_type:
        return None
    event_id = rollback_result_id(request.event_id, memory_type)
    if own.find(event_id) is not None or await read(read_model.rollback_projected, event_id):
        return None
    mine: list[OwnRecord] = own.of_user(request.user_id)
    stored: list[StoredVersion] = await read(read_model.memory_versions, request.memory_id)
    versions = {v.version: v for v in [*stored, *versions_in(mine, request.memory_id)]}
    current = (await known(request.user_id)).get(request.memory_id)
    decided = rollback_decision(request, current, versions.values(), provenance)
    result = rollback_record(request, decided)
    if result.refused:
        log.info("rollback %s refused: %s", request.event_id, result.refused)
    return result
