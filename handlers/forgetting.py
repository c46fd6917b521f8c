"""Forgetting, decided: which memories a request erases, and the facts the stages record.

Pure functions (docs/architecture.md, "Forgetting"). A memory type's stage reads three kinds of
forget input on the snapshots topic, in order with the user's snapshots and saves:

* `MemoryForgotten` of its type — that memory;
* `SessionsForgotten` (a window partition dropped these sessions' open turns) — every memory
  with a version learned or saved in one of those sessions;
* `UserForgotten` (the copy on the snapshots topic) — every memory with a version from a direct
  save, and every memory whose origins were not recorded (learned before they were); the
  sessions are covered by the windows' `SessionsForgotten`.

It erases them from what it reconciles against, so reconciliation never reinforces or updates
a forgotten memory, and writes one `MemoriesForgotten` fact for the projector.
"""

from __future__ import annotations

from collections.abc import Iterable

from events.forgetting import (
    ForgetScope,
    MemoriesForgotten,
    MemoryExpired,
    MemoryForgotten,
    SessionsForgotten,
    UserForgotten,
)
from events.memories import MemoryType, derived_id
from events.snapshots import SnapshotPromoted
from handlers.known_memory import KnownMemoryFacts

StageForgetInput = MemoryForgotten | SessionsForgotten | UserForgotten | MemoryExpired
"""The forget inputs a memory type's stage reads on the snapshots topic."""


def applies_to_type(request: StageForgetInput, memory_type: MemoryType) -> bool:
    """Whether the stage of `memory_type` acts on `request` (a memory request names its type)."""
    if isinstance(request, MemoryForgotten | MemoryExpired):
        return request.memory_type == memory_type
    return True


def memories_to_forget(
    request: StageForgetInput, known: Iterable[KnownMemoryFacts]
) -> tuple[str, ...]:
    """The ids of the known memories `request` erases, in the order they are known.

    A `MemoryForgotten` names its memory even when the stage does not know it (already
    forgotten, or never current here): the projector then erases whatever the read model holds.
    """
    if isinstance(request, MemoryForgotten):
        return (request.memory_id,)
    if isinstance(request, MemoryExpired):  # only if that version is still current and due
        return tuple(
            memory.memory_id
            for memory in known
            if memory.memory_id == request.memory_id and memory.expires_at == request.expires_at
        )
    if isinstance(request, SessionsForgotten):
        wanted = {f"session:{session_id}" for session_id in request.session_ids}
        return tuple(m.memory_id for m in known if wanted.intersection(m.origins))
    # The user's own copy: the direct saves, and memories learned before origins were recorded.
    return tuple(m.memory_id for m in known if "save" in m.origins or not m.origins)


def memories_forgotten(
    request: StageForgetInput, memory_type: MemoryType, memory_ids: Iterable[str]
) -> MemoriesForgotten:
    """The fact a memory type's stage writes after erasing `memory_ids` for `request`."""
    scope: ForgetScope
    session_ids: tuple[str, ...] = ()
    if isinstance(request, MemoryForgotten):
        request_id, scope = request.event_id, "memory"
    elif isinstance(request, MemoryExpired):
        request_id, scope = request.event_id, "expiry"
    elif isinstance(request, SessionsForgotten):
        request_id, scope, session_ids = request.request_id, request.scope, request.session_ids
    else:
        request_id, scope = request.event_id, "user"
    return MemoriesForgotten(
        event_id=forgotten_fact_id(request, memory_type),
        occurred_at=request.occurred_at,
        request_id=request_id,
        scope=scope,
        user_id=request.user_id,
        memory_type=memory_type,
        memory_ids=tuple(memory_ids),
        session_ids=session_ids,
        saves=isinstance(request, UserForgotten),
    )


def forgotten_fact_id(request: StageForgetInput, memory_type: MemoryType) -> str:
    """The id of the fact a memory type's stage writes for `request` (one per request)."""
    return derived_id("memories-forgotten", memory_type, request.event_id)


def forget_again(
    request: StageForgetInput, memory_type: MemoryType, known: Iterable[KnownMemoryFacts]
) -> MemoriesForgotten | None:
    """The fact for a request whose fact was written before, read again (a redelivery after a
    crash): None when nothing it covers is known any more — the usual case — else a fact of its
    own (its id names the memories) for what became known again meanwhile: a snapshot before
    the request, applied again after the crash, learned it again."""
    held = list(known)
    known_ids = {memory.memory_id for memory in held}
    again = tuple(i for i in memories_to_forget(request, held) if i in known_ids)
    if not again:
        return None
    fact = memories_forgotten(request, memory_type, again)
    event_id = derived_id("memories-forgotten-again", memory_type, request.event_id, *again)
    return fact.model_copy(update={"event_id": event_id})


def forget_ahead(snapshot: SnapshotPromoted, later: Iterable[object]) -> str | None:
    """The request id of a forget among `later` snapshots-topic events (those after the
    snapshot in its partition) that covers the snapshot's session, if any: the stage then
    extracts nothing from it, so its memories never appear (docs/architecture.md,
    "Forgetting")."""
    for event in later:
        if (
            isinstance(event, SessionsForgotten)
            and event.user_id == snapshot.user_id
            and snapshot.session_id in event.session_ids
        ):
            return event.request_id
    return None
