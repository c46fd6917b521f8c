"""The current memories a stage knows of, and how memory events change them.

A memory type's stage reconciles new memories against the current ones of their scope
(`handlers.reconcile`); forgetting, expiry, consolidation and rollback read the same view. It
is built from the read model and then kept by `evolve`, the one place that says how an event
changes the known memories — for new decisions and for results read back from the log
(docs/architecture.md, "Reconciliation").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict

from events.base import UtcDatetime, at_stored_precision
from events.memories import MemoryAdded, MemoryContent, MemoryEvent, MemoryUpdated


class KnownMemoryFacts(BaseModel):
    """What a stage knows of one current memory besides its content: enough to forget it or
    expire it, read without opening its sealed content (docs/architecture.md,
    "Crypto-shredding")."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    memory_id: str
    version: int
    user_id: str | None = None
    """Whose memory it is (None in state stored before the field existed)."""
    agent_id: str | None = None
    origins: tuple[str, ...] = ()
    """Where its versions came from (`origin_of`), so forgetting a session or the user's saves
    finds it (docs/architecture.md, "Forgetting"); empty in state stored before the field."""
    expires_at: UtcDatetime | None = None
    """When the current version expires (None: never)."""


class KnownMemory(KnownMemoryFacts):
    """The reconciler's view of one current memory: what it says, its version, its vector."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    content: MemoryContent
    embedding: tuple[float, ...]
    embedding_model: str
    learned_at: UtcDatetime | None = None
    """When the current version was made, to the millisecond as the read model keeps it (None:
    not known); consolidation shows a cluster's memories oldest first."""


def evolve(
    scope: Mapping[str, KnownMemory], events: Iterable[MemoryEvent]
) -> dict[str, KnownMemory]:
    """The known memories after `events` (an ADD adds one, an UPDATE replaces it with its next
    version, a REINFORCE merges its new attributes). An event older than what is known (a
    result read back after its effects were stored) changes nothing."""
    known = dict(scope)
    for event in events:
        current = known.get(event.memory_id)
        if isinstance(event, MemoryAdded):
            if current is None:
                known[event.memory_id] = _known_from(event, event.version, ())
        elif isinstance(event, MemoryUpdated):
            if current is None or current.version < event.version:
                earlier = current.origins if current is not None else ()
                known[event.memory_id] = _known_from(event, event.version, earlier)
        elif current is not None and current.version == event.version and event.merged_attributes:
            attributes = {**current.content.attributes, **event.merged_attributes}
            content = current.content.model_copy(update={"attributes": attributes})
            known[event.memory_id] = current.model_copy(update={"content": content})
    return known


def _known_from(
    event: MemoryAdded | MemoryUpdated, version: int, earlier: tuple[str, ...]
) -> KnownMemory:
    model = event.provenance.embedding_model if event.provenance else ""
    origins = tuple(dict.fromkeys((*earlier, *origin_of(event))))
    return KnownMemory(
        memory_id=event.memory_id,
        version=version,
        user_id=event.user_id,
        agent_id=event.agent_id,
        content=event.content,
        embedding=event.embedding,
        embedding_model=model,
        origins=origins,
        expires_at=event.expires_at,
        learned_at=at_stored_precision(event.occurred_at),
    )


def origin_of(event: MemoryAdded | MemoryUpdated) -> tuple[str, ...]:
    """Where a version came from: `session:<id>` for a session it was learned or saved in, and
    `save` for a direct save (a save may name a session too)."""
    evidence = event.evidence
    found = [f"session:{evidence.session_id}"] if evidence.session_id else []
    if evidence.source == "sdk":
        found.append("save")
    return tuple(found)
