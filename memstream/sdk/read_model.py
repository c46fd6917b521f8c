"""Reading the MongoDB read model, one user at a time, without blocking the event loop.

Every query here names its user: no method of the SDK reads across users (operators use
`memstream.operator`). Reads go through pymongo's `AsyncMongoClient`. The rules are in
`handlers` (point in time: `handlers.history`; search ranking: `handlers.search`; the context
block: `handlers.context`); this module only fetches and hands over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Literal, cast

from pymongo import ASCENDING, DESCENDING, AsyncMongoClient

from events.memories import MemoryType
from handlers.history import state_as_of
from handlers.messages import ChatMessage
from handlers.recall import (
    PastMessage,
    PromotedRun,
    conversation_runs,
    preceding,
    speaker_of,
)
from handlers.rendering import session_context
from handlers.search import NO_FILTERS, Filters, SearchMode
from memstream.sdk.results import (
    Consolidation,
    Document,
    LlmUsage,
    Memory,
    MemoryVersion,
    Profile,
    Rollback,
    Save,
    SearchHit,
    Snapshot,
    Turn,
)
from memstream.sdk.search_index import INDEXED_FIELDS, Revision, SearchIndex, UserIndex
from projections.store import (
    CONSOLIDATIONS,
    ERASURES,
    MEMORIES,
    MEMORY_EVENTS,
    MEMORY_WRITES,
    PROFILES,
    ROLLBACKS,
    SAVES,
    SNAPSHOTS,
    TURNS,
)

log = logging.getLogger(__name__)


class ReadModel:
    """User-scoped queries on the read model (memories, history, turns, snapshots, profile)."""

    def __init__(
        self, uri: str, database: str, *, client: AsyncMongoClient[Document] | None = None
    ) -> None:
        """`client`: a connection pool to share (its owner closes it); without one the read
        model opens its own, to `uri`, and closes it."""
        self._owns_client = client is None
        self._client: AsyncMongoClient[Document] = client or AsyncMongoClient(uri, tz_aware=True)
        self._db = self._client[database]
        self._index = SearchIndex()

    async def close(self) -> None:
        if self._owns_client:
            await self._client.close()

    # -- memories ------------------------------------------------------------------------------

    async def memories(
        self,
        user_id: str,
        *,
        memory_type: MemoryType | None = None,
        history: bool = False,
        as_of: datetime | None = None,
        agent_id: str | None = None,
    ) -> list[Memory]:
        """Current memories (every version with `history`; as they were at `as_of`)."""
        query: Document = {"user_id": user_id}
        if memory_type:
            query["memory_type"] = memory_type
        if agent_id:
            query["agent_id"] = agent_id
        if as_of is not None:
            versions = await self._find(MEMORIES, query, {"embedding": 0})
            events = await self._find(MEMORY_EVENTS, {"user_id": user_id})
            return cast(list[Memory], state_as_of(versions, events, as_of))
        if not history:
            query["status"] = "current"
        cursor = self._db[MEMORIES].find(query, {"embedding": 0})
        found = await cursor.sort([("created_at", DESCENDING), ("_id", ASCENDING)]).to_list()
        return cast(list[Memory], found)

    async def history(self, user_id: str, memory_id: str) -> list[MemoryVersion]:
        """Every version of one of the user's memories, oldest first, each with the event that
        made it and the events that reinforced it."""
        query = {"user_id": user_id, "memory_id": memory_id}
        versions = await self._find(
            MEMORIES, query, {"embedding": 0}, sort=[("version", ASCENDING)]
        )
        events = await self._find(
            MEMORY_EVENTS, query, sort=[("occurred_at", ASCENDING), ("_id", ASCENDING)]
        )
        by_id = {event["_id"]: event for event in events}
        rollbacks = await self._find(ROLLBACKS, query)
        by_decision = {d: r for r in rollbacks for d in r.get("decision_ids") or ()}
        for version in versions:
            version["created_by"] = by_id.get(version.get("created_by_event", ""))
            version["rolled_back_by"] = by_decision.get(version.get("created_by_event", ""))
            version["reinforced_by"] = [
                e
                for e in events
                if e["event_type"] == "MemoryReinforced"
                and e["event"]["version"] == version["version"]
            ]
        return cast(list[MemoryVersion], versions)

    # -- search --------------------------------------------------------------------------------

    async def search(
        self,
        user_id: str,
        query: str,
        query_vector: Sequence[float],
        embedding_model: str,
        *,
        limit: int = 10,
        mode: SearchMode = "hybrid",
        filters: Filters = NO_FILTERS,
    ) -> list[SearchHit]:
        """The user's current memories best matching `query` (hybrid by default) and
        `filters`, with `score`, `vector_score` and `keyword_score`."""
        index = await self._user_index(user_id)
        found: list[SearchHit] = []
        for hit in index.search(
            query, query_vector, embedding_model, mode=mode, limit=limit, filters=filters
        ):
            document = dict(index.documents[hit.position])
            document.update(
                score=hit.score, vector_score=hit.vector_score, keyword_score=hit.keyword_score
            )
            found.append(cast(SearchHit, document))
        return found

    async def _user_index(self, user_id: str) -> UserIndex:
        """The user's index, brought up to date: updated with the memories changed since it
        was built when the user's change feed (`memory_writes`) still lists them all, rebuilt
        from every current memory otherwise (docs/architecture.md, "Search"). The build and the
        update run in a thread: the event loop goes on serving other requests meanwhile."""
        writes = await self._db[MEMORY_WRITES].find_one({"_id": user_id})
        revision: Revision
        if writes is None:  # a database projected before the change feed existed
            count = await self._db[MEMORY_EVENTS].count_documents({"user_id": user_id})
            revision = f"events:{count}"
        else:
            revision = int(writes.get("count", 0))
        index = self._index.latest(user_id)
        if index is not None and index.revision == revision:
            return index
        changed = list((writes or {}).get("changed") or [])
        if (
            index is not None
            and isinstance(index.revision, int)
            and isinstance(revision, int)
            and 0 < revision - index.revision <= len(changed)
        ):
            ids = sorted(set(changed[len(changed) - (revision - index.revision) :]))
            documents = await self._indexed_memories(user_id, ids)
            updated = await asyncio.to_thread(index.updated, revision, ids, documents)
            return self._index.store(user_id, updated)
        documents = await self._indexed_memories(user_id)
        built = await asyncio.to_thread(UserIndex.built, revision, documents)
        return self._index.store(user_id, built)

    async def _indexed_memories(
        self, user_id: str, memory_ids: Sequence[str] | None = None
    ) -> list[Document]:
        """The user's current memories (those of `memory_ids` only, if given) with the fields
        the index reads: one query, its vectors as stored (`memstream.sdk.search_index` unpacks
        them)."""
        chosen: Document = {} if memory_ids is None else {"memory_id": {"$in": list(memory_ids)}}
        query = {**chosen, "user_id": user_id, "status": "current"}
        return await self._find(MEMORIES, query, INDEXED_FIELDS)

    async def memory_type_of(self, user_id: str, memory_id: str) -> MemoryType | None:
        """The type of one of the user's memories (`None`: the user has no such memory)."""
        found = await self._db[MEMORIES].find_one(
            {"user_id": user_id, "memory_id": memory_id}, {"memory_type": 1}
        )
        if found is None:
            return None
        memory_type: MemoryType = found["memory_type"]
        return memory_type

    # -- erasures ------------------------------------------------------------------------------

    async def erasures(self, user_id: str) -> list[Document]:
        """The user's erasure receipts, newest request first."""
        return await self._find(
            ERASURES, {"user_id": user_id}, sort=[("requested_at", DESCENDING), ("_id", ASCENDING)]
        )

    async def erasure(self, request_id: str) -> Document | None:
        """One receipt by its request id (the caller checks whose it is)."""
        found: Document | None = await self._db[ERASURES].find_one({"_id": request_id})
        return found

    async def erased_memory_ids(self, user_id: str) -> frozenset[str]:
        """Every memory id the user's receipts list as erased (by any memories step)."""
        ids: set[str] = set()
        for receipt in await self._find(ERASURES, {"user_id": user_id}, {"steps": 1}):
            for step in (receipt.get("steps") or {}).values():
                ids.update(step.get("memory_ids") or ())
        return frozenset(ids)

    # -- short-term memory and audit -----------------------------------------------------------

    async def recent_turns(self, user_id: str, session_id: str, limit: int) -> list[Turn]:
        """The session's latest `limit` turns, oldest first."""
        query = {"user_id": user_id, "session_id": session_id}
        cursor = self._db[TURNS].find(query).sort("occurred_at", DESCENDING).limit(limit)
        return cast(list[Turn], list(reversed(await cursor.to_list())))

    async def past_messages(
        self, user_id: str, *, other_than: str | None, agent_id: str | None, scanned: int
    ) -> list[PastMessage]:
        """The user's latest `scanned` user and assistant turns outside session `other_than`
        (of agent `agent_id`, when given), newest first (equal times by turn id, so the same
        read gives the same list), each with the message said just before it when its snapshot
        has been promoted, in that snapshot or at the end of the session's previous one
        (`handlers.recall.conversation_runs`, `preceding`), for `handlers.recall`."""
        query: Document = {"user_id": user_id, "role": {"$in": ["user", "assistant"]}}
        if other_than is not None:
            query["session_id"] = {"$ne": other_than}
        if agent_id is not None:
            query["agent_id"] = agent_id
        fields = {"role": 1, "name": 1, "content": 1, "occurred_at": 1, "snapshot_id": 1}
        found = await self._find(
            TURNS,
            query,
            fields,
            sort=[("occurred_at", DESCENDING), ("_id", DESCENDING)],
            limit=scanned,
        )
        snapshot_ids = sorted({turn["snapshot_id"] for turn in found if turn.get("snapshot_id")})
        snapshots = (
            await self._find(
                SNAPSHOTS,
                {"_id": {"$in": snapshot_ids}},
                {"session_id": 1, "seq": 1, "first_turn_at": 1, "turn_ids": 1},
            )
            if snapshot_ids
            else []
        )
        runs = conversation_runs(
            [
                PromotedRun(s["session_id"], s["seq"], s["first_turn_at"], s["turn_ids"])
                for s in snapshots
                if "turn_ids" in s  # promoted, not only extracted
            ]
        )
        before = preceding(runs, {turn["_id"]: turn["content"] for turn in found})
        return [
            PastMessage(
                speaker_of(turn["role"], turn.get("name")),
                turn["content"],
                turn["occurred_at"].date() if turn.get("occurred_at") else None,
                before.get(turn["_id"], ""),
            )
            for turn in found
        ]

    async def session_history(
        self, user_id: str, session_id: str, *, max_chars_per_message: int, snapshots: int
    ) -> str:
        """The session rendered for a prompt: the last `snapshots` promoted snapshots' raw
        history, then the turns not promoted yet (see `handlers.rendering.session_context`)."""
        query = {"user_id": user_id, "session_id": session_id}
        stored = self._db[SNAPSHOTS].find(query, {"raw_history": 1}).sort("promoted_at", DESCENDING)
        raw = [
            s["raw_history"]
            for s in await stored.limit(snapshots).to_list()
            if s.get("raw_history")
        ]
        waiting = await self._find(
            TURNS, {**query, "snapshot_id": None}, sort=[("occurred_at", ASCENDING)]
        )
        pending = [
            ChatMessage(
                role=t["role"],
                content=t["content"],
                name=t.get("name"),
                tool_name=t.get("tool_name"),
            )
            for t in waiting
        ]
        return session_context(
            list(reversed(raw)), pending, max_chars_per_message=max_chars_per_message
        )

    async def snapshots(self, user_id: str, session_id: str | None) -> list[Snapshot]:
        """The user's snapshots (of one session, if given), by session then promotion."""
        query: Document = {"user_id": user_id}
        if session_id:
            query["session_id"] = session_id
        found = await self._find(
            SNAPSHOTS,
            query,
            sort=[("session_id", ASCENDING), ("promoted_at", ASCENDING), ("seq", ASCENDING)],
        )
        return cast(list[Snapshot], found)

    async def saves(self, user_id: str) -> list[Save]:
        """What the user's direct saves did, newest first."""
        found = await self._find(SAVES, {"user_id": user_id}, sort=[("at", DESCENDING)])
        return cast(list[Save], found)

    async def rollback(self, user_id: str, rollback_id: str) -> Rollback | None:
        """What the user's rollback request `rollback_id` did (None: not decided, or its
        restoring version not projected yet: the projector claims the request's document
        before it writes the version)."""
        query = {"user_id": user_id, "rollback_id": rollback_id}
        found = await self._db[ROLLBACKS].find_one(query)
        if found is None:
            return None
        for event_id in found.get("decision_ids") or ():
            if await self._db[MEMORY_EVENTS].find_one({"_id": event_id}, {"_id": 1}) is None:
                return None
        return cast(Rollback, found)

    async def consolidation(self, user_id: str, consolidation_id: str) -> list[Consolidation]:
        """The runs of the user's consolidation request projected so far, one per memory type
        (a run counts once its new versions and retirements are projected too), by type."""
        query = {"user_id": user_id, "consolidation_id": consolidation_id}
        found = await self._find(CONSOLIDATIONS, query, sort=[("memory_type", ASCENDING)])
        runs = []
        for run in found:
            retired = [each.get("event_id") for each in run.get("retired") or ()]
            for event_id in [*(run.get("decision_ids") or ()), *retired]:
                if await self._db[MEMORY_EVENTS].find_one({"_id": event_id}, {"_id": 1}) is None:
                    break
            else:
                runs.append(run)
        return cast(list[Consolidation], runs)

    async def profile(self, user_id: str) -> Profile | None:
        return cast(Profile | None, await self._db[PROFILES].find_one({"_id": user_id}))

    async def llm_usage(self, user_id: str | None) -> dict[str, LlmUsage]:
        """LLM calls and tokens per memory type, from every snapshot's and save's record."""
        query: Document = {} if user_id is None else {"user_id": user_id}
        totals: dict[str, LlmUsage] = {}

        def add(
            memory_type: str, usage: Document | None, kind: Literal["snapshots", "saves"]
        ) -> None:
            total = totals.setdefault(
                memory_type,
                LlmUsage(snapshots=0, saves=0, calls=0, prompt_tokens=0, completion_tokens=0),
            )
            total[kind] += 1
            spent = usage or {}
            total["calls"] += int(spent.get("calls", 0))
            total["prompt_tokens"] += int(spent.get("prompt_tokens", 0))
            total["completion_tokens"] += int(spent.get("completion_tokens", 0))

        for snapshot in await self._find(SNAPSHOTS, query, {"extractions": 1}):
            for memory_type, record in (snapshot.get("extractions") or {}).items():
                add(memory_type, record.get("usage"), "snapshots")
        for save in await self._find(SAVES, query, {"memory_type": 1, "usage": 1}):
            add(save["memory_type"], save.get("usage"), "saves")
        return totals

    async def _find(
        self,
        collection: str,
        query: Document,
        projection: Document | None = None,
        sort: list[tuple[str, int]] | None = None,
        limit: int = 0,
    ) -> list[Document]:
        cursor = self._db[collection].find(query, projection)
        if sort:
            cursor = cursor.sort(sort)
        if limit:
            cursor = cursor.limit(limit)
        return await cursor.to_list()
