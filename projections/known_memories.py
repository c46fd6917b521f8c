"""What a memory type's stage reads of the read model: a user's current memories, and whether a
result or a forget fact is already projected (docs/architecture.md, "Reconciliation").

A stage reconciles against the user's current memories of its type. It no longer keeps every
memory of every user it has ever seen (its state grew with history, and a start replayed it
all): it reads the user's memories here, and lays over them its own decisions the projector has
not applied yet (`streams.own_decisions`). Every read is by user (or by id), on an index.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any

from events.memories import MemoryContent, MemoryType
from handlers.known_memory import KnownMemory, KnownMemoryFacts
from handlers.rollback import StoredVersion
from projections.progress import projected_offsets
from projections.store import CONSOLIDATIONS, ERASURES, MEMORIES, ROLLBACKS, SAVES, SNAPSHOTS, Db
from projections.vectors import unpack_vector

_CURRENT_FIELDS = {
    "_id": 0,
    "memory_id": 1,
    "version": 1,
    "user_id": 1,
    "agent_id": 1,
    "subject": 1,
    "owner": 1,
    "text": 1,
    "category": 1,
    "attributes": 1,
    "embedding": 1,
    "embedding_model": 1,
    "expires_at": 1,
    "created_at": 1,
}
_ORIGIN_FIELDS = {
    "_id": 0,
    "memory_id": 1,
    "version": 1,
    "evidence.session_id": 1,
    "evidence.source": 1,
}
_FACT_FIELDS = {"_id": 0, "memory_id": 1, "version": 1, "user_id": 1, "agent_id": 1}


class StageReadModel:
    """The read model as a memory type's stage sees it (`handlers.ports.StageReadModel`)."""

    def __init__(self, db: Db, memories_topic: str) -> None:
        self._db = db
        self._memories_topic = memories_topic

    def projected_offsets(self, partitions: Collection[int]) -> dict[int, int | None]:
        """How far the projector applied each memories-topic partition."""
        return projected_offsets(self._db, self._memories_topic, partitions)

    def current_memories(self, user_id: str, memory_type: MemoryType) -> list[KnownMemory]:
        """The user's current memories of `memory_type`, every scope, with their vectors."""
        selector = {"user_id": user_id, "memory_type": memory_type}
        current = list(self._db[MEMORIES].find({**selector, "status": "current"}, _CURRENT_FIELDS))
        if not current:
            return []
        origins = self._origins(selector)
        return [_known(document, origins.get(document["memory_id"], ())) for document in current]

    def memory_facts(
        self, user_id: str, memory_type: MemoryType, *, retired: bool = False
    ) -> list[KnownMemoryFacts]:
        """The user's current memories of `memory_type` without their content (forgetting);
        with `retired`, the memories a consolidation retired too."""
        selector = {"user_id": user_id, "memory_type": memory_type}
        fields = {**_FACT_FIELDS, "expires_at": 1}
        status: Any = {"$in": ["current", "retired"]} if retired else "current"
        current = list(self._db[MEMORIES].find({**selector, "status": status}, fields))
        if not current:
            return []
        origins = self._origins(selector)
        return [
            KnownMemoryFacts.model_validate(
                {**document, "origins": origins.get(document["memory_id"], ())}
            )
            for document in current
        ]

    def extraction_holder(self, snapshot_id: str, memory_type: MemoryType) -> str | None:
        """The id of the result that holds the snapshot's extraction slot of `memory_type`."""
        return self._extraction_field(snapshot_id, memory_type, "event_id")

    def extraction_failure(self, snapshot_id: str, memory_type: MemoryType) -> str | None:
        """The failure of the result holding the snapshot's extraction of `memory_type`."""
        return self._extraction_field(snapshot_id, memory_type, "failure")

    def _extraction_field(self, snapshot_id: str, memory_type: MemoryType, name: str) -> str | None:
        """One field of the snapshot's extraction slot of `memory_type` (None: unset)."""
        slot = f"extractions.{memory_type}"
        found = self._db[SNAPSHOTS].find_one({"_id": snapshot_id}, {f"{slot}.{name}": 1})
        held = ((found or {}).get("extractions") or {}).get(memory_type) or {}
        value = held.get(name)
        return str(value) if value else None

    def save_projected(self, result_id: str) -> bool:
        """Whether a direct save's result is in `saves`."""
        return self._db[SAVES].find_one({"_id": result_id}, {"_id": 1}) is not None

    def rollback_projected(self, result_id: str) -> bool:
        """Whether a rollback's result is in `rollbacks`."""
        return self._db[ROLLBACKS].find_one({"_id": result_id}, {"_id": 1}) is not None

    def consolidation_projected(self, result_id: str) -> bool:
        """Whether a consolidation's result is in `consolidations`."""
        return self._db[CONSOLIDATIONS].find_one({"_id": result_id}, {"_id": 1}) is not None

    def memory_versions(self, memory_id: str) -> list[StoredVersion]:
        """Every stored version of `memory_id` (any status, whoever's), oldest first."""
        fields = {**_CURRENT_FIELDS, "memory_type": 1}
        found = self._db[MEMORIES].find({"memory_id": memory_id}, fields).sort("version", 1)
        return [
            StoredVersion(
                memory_id=document["memory_id"],
                version=document["version"],
                user_id=document["user_id"],
                memory_type=document["memory_type"],
                content=_content(document),
                embedding=unpack_vector(document.get("embedding")),
                embedding_model=document.get("embedding_model") or "",
                expires_at=document.get("expires_at"),
            )
            for document in found
        ]

    def forget_projected(self, request_id: str, fact_id: str) -> bool:
        """Whether the forget fact `fact_id` left its step on the request's receipt."""
        step = f"steps.memories-{fact_id}"
        found = self._db[ERASURES].find_one({"_id": request_id, step: {"$exists": True}})
        return found is not None

    def due_memories(self, memory_type: MemoryType, now: datetime) -> list[KnownMemoryFacts]:
        """Current memories of `memory_type` whose version expires at or before `now`."""
        selector = {
            "memory_type": memory_type,
            "status": "current",
            "expires_at": {"$ne": None, "$lte": now},
        }
        fields = {**_FACT_FIELDS, "expires_at": 1}
        return [
            KnownMemoryFacts.model_validate(document)
            for document in self._db[MEMORIES].find(selector, fields)
        ]

    def _origins(self, selector: dict[str, Any]) -> dict[str, tuple[str, ...]]:
        """Where each memory's versions came from (`handlers.known_memory.origin_of`): every
        version's first evidence is the one that created it."""
        found: dict[str, list[str]] = {}
        versions = self._db[MEMORIES].find(selector, _ORIGIN_FIELDS)
        for document in sorted(versions, key=lambda d: (d["memory_id"], d["version"])):
            evidence = (document.get("evidence") or [{}])[0]
            origins = found.setdefault(document["memory_id"], [])
            if evidence.get("session_id"):
                origins.append(f"session:{evidence['session_id']}")
            if evidence.get("source") == "sdk":
                origins.append("save")
        return {memory_id: tuple(dict.fromkeys(each)) for memory_id, each in found.items()}


def _content(document: dict[str, Any]) -> MemoryContent:
    return MemoryContent(
        subject=document["subject"],
        owner=document["owner"],
        text=document["text"],
        category=document.get("category"),
        attributes=document.get("attributes") or {},
    )


def _known(document: dict[str, Any], origins: Iterable[str]) -> KnownMemory:
    content = _content(document)
    return KnownMemory(
        memory_id=document["memory_id"],
        version=document["version"],
        user_id=document.get("user_id"),
        agent_id=document.get("agent_id"),
        content=content,
        embedding=unpack_vector(document.get("embedding")),
        embedding_model=document.get("embedding_model") or "",
        origins=tuple(origins),
        expires_at=document.get("expires_at"),
        learned_at=document.get("created_at"),
    )
