"""The Python SDK: record turns (a fast append to Kafka) and read what memstream learned.

    async with MemoryClient(load_settings()) as memory:
        await memory.record("tim", "s1", [{"role": "user", "content": "I work at Stripe."}])
        await memory.flush("tim", "s1")
        await memory.search("tim", "where does Tim work?")

No extraction runs on the write path; knowledge appears once the session's snapshot is extracted.
Every read is async (pymongo's async driver) and names its user; `SyncMemoryClient` offers the
same calls to code without an event loop.

Forgetting (`forget`, `forget_session`, `forget_user`) only writes a request to the log and
returns its id; the stages carry it out in order with everything before it, and each leaves a
step on the request's receipt (`erasure`, `wait_for_erasure`; docs/architecture.md,
"Forgetting").
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from types import TracebackType
from typing import Any, Unpack, cast

from events.consolidations import DEFAULT_MAX_CALLS, MemoryConsolidationRequested
from events.forgetting import MemoryForgotten, SessionForgotten, UserForgotten
from events.memories import USER_SUBJECT, MemoryContent, MemoryEvent, MemoryType, Owner
from events.rollbacks import MemoryRollbackRequested
from events.saves import MemorySaveRequested
from events.turns import Principal, SessionFlushRequested, TurnRecorded
from handlers.context import ContextMemory, context_block
from handlers.erasure_receipts import SDK_REQUESTER, requester, with_progress
from handlers.extraction.custom import heading_of
from handlers.identity import resolve_scope, whole_user_erasure
from handlers.messages import ChatMessage, normalize_messages
from handlers.ports import Embedder
from handlers.rendering import detect_language
from handlers.search import SearchMode
from memstream.config import Settings
from memstream.keystore.sealing import ClientKeys
from memstream.sdk.memory_types import attributes_for, known_types
from memstream.sdk.producer import EventProducer
from memstream.sdk.read_model import ReadModel
from memstream.sdk.results import (
    Consolidation,
    ErasureReceipt,
    LlmUsage,
    Memory,
    MemoryVersion,
    Profile,
    Rollback,
    Save,
    SearchHit,
    Snapshot,
    Turn,
    consolidation_complete,
)
from memstream.sdk.search_filters import SearchFilters, as_filters
from memstream.sdk.served import ServedReadModels
from streams.settings import Clock, utc_now

log = logging.getLogger(__name__)
ERASURE_POLL_SECONDS = 0.5


class MemoryNotFound(LookupError):
    """The user has no memory with this id (a forget request for it is not sent)."""


@dataclass
class _Connections:
    """What a client and its `acting_as` views share: opened once, closed by the client."""

    producer: EventProducer
    keys: ClientKeys
    reads: ServedReadModels | None = None
    embedder: Embedder | None = None


class MemoryClient:
    """Records conversations and reads memories for explicit `user_id`/`session_id` pairs."""

    def __init__(
        self,
        settings: Settings,
        *,
        principal: Principal | None = None,
        deployed_agent: bool = False,
        clock: Clock = utc_now,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
        embedder: Embedder | None = None,
        requested_by: str = SDK_REQUESTER,
    ) -> None:
        """`requested_by`: who a forget request says asked when the client acts as no principal
        (the CLI passes `cli:<operator>`)."""
        self.settings = settings
        self.principal = principal
        self.deployed_agent = deployed_agent
        self.ignored_user_ids = 0
        self._clock = clock
        self._new_id = new_id
        self._requester = requested_by
        self._topics = settings.kafka.topics
        keys = ClientKeys(settings, clock)
        self._shared = _Connections(
            EventProducer(settings.kafka, keys.encode), keys, embedder=embedder
        )
        self._owner = True

    async def __aenter__(self) -> MemoryClient:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect the producer (reads connect to MongoDB on first use)."""
        await self._producer.start()

    async def close(self) -> None:
        """Disconnect (a view made by `acting_as` leaves that to the client it came from)."""
        if not self._owner:
            return
        await self._producer.stop()
        self._shared.keys.close()
        if self._shared.reads is not None:
            await self._shared.reads.close()
            self._shared.reads = None

    def acting_as(self, principal: Principal, *, deployed_agent: bool = False) -> MemoryClient:
        """This client's calls on behalf of `principal`, recorded on every turn and save: the
        same producer, read model and embedder (the HTTP API makes one per request; see
        docs/architecture.md, "HTTP API and keys"). Closing the view closes nothing."""
        view = copy.copy(self)
        view.principal = principal
        view.deployed_agent = deployed_agent
        view.ignored_user_ids = 0
        view._owner = False
        return view

    # -- writing -------------------------------------------------------------------------------

    async def record(
        self,
        user_id: str,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        agent_id: str | None = None,
        occurred_at: datetime | None = None,
    ) -> list[TurnRecorded]:
        """Append OpenAI- or Anthropic-style messages as turns, in order.

        Every message is validated first; a bad one raises `InvalidMessageError` (naming its
        index) before anything is sent.
        """
        normalized = normalize_messages(
            messages, max_content_chars=self.settings.limits.max_turn_chars
        )
        user_id = self._memory_user(user_id)
        now = self._clock()
        turns = [
            self._turn(user_id, session_id, agent_id, message, occurred_at or now, now)
            for message in normalized
        ]
        await self._producer.append(self._topics.turns, turns)
        return turns

    async def flush(self, user_id: str, session_id: str) -> None:
        """End a session: promote its pending turns now (snapshot reason `flush`)."""
        command = SessionFlushRequested(
            event_id=self._new_id(),
            occurred_at=self._clock(),
            user_id=self._memory_user(user_id),
            session_id=session_id,
        )
        await self._producer.append(self._topics.turns, [command])

    async def save(
        self,
        user_id: str,
        memory_type: MemoryType,
        text: str,
        *,
        subject: str = USER_SUBJECT,
        owner: Owner = "user",
        category: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        expires_at: datetime | None = None,
    ) -> str:
        """Save a memory directly; returns the save's id.

        Any memory type, extracted automatically or not. The save goes through the same
        reconciliation as extracted memories (it may ADD, UPDATE or REINFORCE), in order with
        the user's snapshots; `saves(user_id)` tells what it did. With `expires_at` (timezone
        aware) the memory version it makes is forgotten then (otherwise the type's retention
        applies, if configured). Invalid content raises `pydantic.ValidationError` before
        anything is sent, so does a custom type's attribute that breaks its declaration;
        `UnknownMemoryType` a type neither built in nor declared.
        """
        content = MemoryContent(
            subject=subject,
            owner=owner,
            text=text,
            category=category,
            attributes=attributes_for(self.settings, memory_type, attributes),
        )
        request = MemorySaveRequested(
            event_id=self._new_id(),
            occurred_at=self._clock(),
            user_id=self._memory_user(user_id),
            agent_id=agent_id,
            session_id=session_id,
            memory_type=memory_type,
            content=content,
            principal=self.principal,
            expires_at=expires_at,
        )
        await self._producer.append(self._topics.snapshots, [request])
        return request.event_id

    # -- forgetting ----------------------------------------------------------------------------

    @property
    def requested_by(self) -> str:
        """Who this client's forget requests say asked: the acting principal, else the
        client's requester."""
        return requester(self.principal, self._requester)

    async def forget(self, user_id: str, memory_id: str, *, reason: str = "") -> str:
        """Forget one of the user's memories, every version of it; returns the request id.

        Raises `MemoryNotFound` (nothing is sent) when the read model has no such memory for
        the user — also once it has been forgotten."""
        user = self._memory_user(user_id)
        memory_type = await (await self._reads()).memory_type_of(user, memory_id)
        if memory_type is None:
            raise MemoryNotFound(f"user {user!r} has no memory {memory_id!r}")
        request = MemoryForgotten(
            event_id=self._new_id(),
            occurred_at=self._clock(),
            user_id=user,
            requested_by=self.requested_by,
            reason=reason,
            memory_id=memory_id,
            memory_type=memory_type,
        )
        await self._producer.append(self._topics.snapshots, [request])
        return request.event_id

    async def forget_session(self, user_id: str, session_id: str, *, reason: str = "") -> str:
        """Forget a session: its turns, snapshots and the memories it contributed a version
        to; returns the request id. A session with no data is forgotten all the same (the
        receipt then counts nothing)."""
        request = SessionForgotten(
            event_id=self._new_id(),
            occurred_at=self._clock(),
            user_id=self._memory_user(user_id),
            requested_by=self.requested_by,
            reason=reason,
            session_id=session_id,
        )
        await self._producer.append(self._topics.turns, [request])
        return request.event_id

    async def forget_user(self, user_id: str, *, reason: str = "") -> str:
        """Forget everything of a user; returns the request id.

        One `UserForgotten` per turns-topic partition (each window partition forgets the
        user's sessions it holds), then one on the snapshots topic (the user's direct saves),
        all with the same id. A deployed agent's service account may forget only itself:
        naming another user raises `handlers.identity.Refused`."""
        user = whole_user_erasure(
            resolve_scope(user_id, self.principal, deployed_agent=self.deployed_agent)
        )
        request_id, now = self._new_id(), self._clock()

        def copy_for(partition: int | None) -> UserForgotten:
            return UserForgotten(
                event_id=request_id,
                occurred_at=now,
                user_id=user,
                requested_by=self.requested_by,
                reason=reason,
                turns_partition=partition,
            )

        for partition in range(self.settings.kafka.partitions):
            await self._producer.append(
                self._topics.turns, [copy_for(partition)], partition=partition
            )
        await self._producer.append(self._topics.snapshots, [copy_for(None)])
        return request_id

    async def erasures(self, user_id: str) -> list[ErasureReceipt]:
        """The user's erasure receipts, newest first, each with `complete` (every stage that
        must act on the request has left its step; `handlers.erasure_receipts`)."""
        found = await (await self._reads()).erasures(self._memory_user(user_id))
        partitions, types = self.settings.kafka.partitions, len(self.settings.memory.types)
        return [
            cast(ErasureReceipt, with_progress(receipt, partitions, types)) for receipt in found
        ]

    async def erasure(self, request_id: str) -> ErasureReceipt | None:
        """One request's receipt, with `complete` (`None`: no step has been projected yet, or
        the receipt is another user's than this client may read)."""
        found = await (await self._reads()).erasure(request_id)
        if found is None or "kind" not in found:  # a receipt an older projector began bare
            return None
        if not self._may_read(found["user_id"]):
            return None
        partitions, types = self.settings.kafka.partitions, len(self.settings.memory.types)
        return cast(ErasureReceipt, with_progress(found, partitions, types))

    async def wait_for_erasure(self, request_id: str, timeout: float = 60.0) -> ErasureReceipt:
        """The request's receipt once it is complete; `TimeoutError` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            receipt = await self.erasure(request_id)
            if receipt is not None and receipt["complete"]:
                return receipt
            if time.monotonic() >= deadline:
                seen = "no step yet" if receipt is None else f"steps {receipt['seen_steps']}"
                raise TimeoutError(
                    f"erasure {request_id} not complete after {timeout:.0f}s ({seen})"
                )
            await asyncio.sleep(ERASURE_POLL_SECONDS)

    # -- rollback ------------------------------------------------------------------------------

    async def rollback(
        self, user_id: str, memory_id: str, to_version: int, *, requested_by: str, reason: str = ""
    ) -> str:
        """Restore one of the user's memories to its version `to_version`; returns the request
        id. The memory's stage writes the next version with that version's text, vector and
        expiry, in order with the user's snapshots and saves, or refuses (an unknown version,
        the current one, an expired memory): `rollback_result` tells which. `requested_by`
        (who) and `reason` (why) are kept with it and shown by `history`. Raises
        `MemoryNotFound` (nothing is sent) when the read model has no such memory for the
        user."""
        user = self._memory_user(user_id)
        memory_type = await (await self._reads()).memory_type_of(user, memory_id)
        if memory_type is None:
            raise MemoryNotFound(f"user {user!r} has no memory {memory_id!r}")
        request = MemoryRollbackRequested(
            event_id=self._new_id(),
            occurred_at=self._clock(),
            user_id=user,
            memory_type=memory_type,
            memory_id=memory_id,
            to_version=to_version,
            requested_by=requested_by,
            reason=reason,
            principal=self.principal,
        )
        await self._producer.append(self._topics.snapshots, [request])
        return request.event_id

    async def rollback_result(self, user_id: str, rollback_id: str) -> Rollback | None:
        """What the rollback `rollback_id` did (None: not decided and projected yet)."""
        return await (await self._reads()).rollback(self._memory_user(user_id), rollback_id)

    async def wait_for_rollback(
        self, user_id: str, rollback_id: str, timeout: float = 60.0
    ) -> Rollback:
        """The rollback's result once projected; `TimeoutError` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while (found := await self.rollback_result(user_id, rollback_id)) is None:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"rollback {rollback_id} not decided after {timeout:.0f}s")
            await asyncio.sleep(ERASURE_POLL_SECONDS)
        return found

    # -- consolidation -------------------------------------------------------------------------

    async def consolidate(
        self,
        user_id: str,
        *,
        memory_types: Sequence[MemoryType] | None = None,
        max_calls: int = DEFAULT_MAX_CALLS,
        requested_by: str,
        reason: str = "",
    ) -> str:
        """Consolidate the user's current memories of `memory_types` (None: every enabled
        type); returns the request id. Each type's stage finds clusters of near-duplicate or
        contradicting memories of one subject, asks the LLM once per cluster (at most
        `max_calls` calls per type) and merges or supersedes them, in order with the user's
        snapshots and saves: `consolidation_result` tells what it did and what it cost.
        `requested_by` (who) and `reason` (why) are kept with it."""
        types = known_types(self.settings, memory_types or self.settings.memory.extraction.enabled)
        request = MemoryConsolidationRequested(
            event_id=self._new_id(),
            occurred_at=self._clock(),
            user_id=self._memory_user(user_id),
            memory_types=types,
            requested_by=requested_by,
            reason=reason,
            max_calls=max_calls,
            principal=self.principal,
        )
        await self._producer.append(self._topics.snapshots, [request])
        return request.event_id

    async def consolidation_result(
        self, user_id: str, consolidation_id: str
    ) -> list[Consolidation]:
        """The runs of the consolidation `consolidation_id` decided and projected so far, one
        per memory type."""
        return await (await self._reads()).consolidation(
            self._memory_user(user_id), consolidation_id
        )

    async def wait_for_consolidation(
        self, user_id: str, consolidation_id: str, timeout: float = 60.0
    ) -> list[Consolidation]:
        """Every type's run once projected; `TimeoutError` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            runs = await self.consolidation_result(user_id, consolidation_id)
            if runs and consolidation_complete(runs):
                return runs
            if time.monotonic() >= deadline:
                done = [run["memory_type"] for run in runs]
                raise TimeoutError(
                    f"consolidation {consolidation_id} not decided after {timeout:.0f}s "
                    f"(done: {done or 'no type'})"
                )
            await asyncio.sleep(ERASURE_POLL_SECONDS)

    # -- reading -------------------------------------------------------------------------------

    async def memories(
        self,
        user_id: str,
        *,
        memory_type: MemoryType | None = None,
        history: bool = False,
        as_of: datetime | None = None,
        agent_id: str | None = None,
    ) -> list[Memory]:
        """The user's current memories, newest first; every version with `history=True`; the
        state at a past time with `as_of` (which version was current, reinforcements then)."""
        return await (await self._reads()).memories(
            self._memory_user(user_id),
            memory_type=memory_type,
            history=history,
            as_of=as_of,
            agent_id=agent_id,
        )

    async def history(self, user_id: str, memory_id: str) -> list[MemoryVersion]:
        """Every version of one memory, oldest first, each with the event that made it
        (`created_by`) and the events that reinforced it (`reinforced_by`)."""
        return await (await self._reads()).history(self._memory_user(user_id), memory_id)

    async def search(
        self,
        user_id: str,
        query: str,
        *,
        limit: int = 10,
        mode: SearchMode = "hybrid",
        **filters: Unpack[SearchFilters],
    ) -> list[SearchHit]:
        """The user's current memories that best answer `query`: vector similarity (vectors of
        the configured embedding model only) fused with keyword matching, or either alone
        (`mode`), filtered by type, agent, subject, owner, category and creation time
        (`SearchFilters`)."""
        embedder = await self._query_embedder()
        (vector,) = await asyncio.to_thread(embedder.embed, [query])
        return await (await self._reads()).search(
            self._memory_user(user_id),
            query,
            vector,
            embedder.model_name,
            limit=limit,
            mode=mode,
            filters=as_filters(filters),
        )

    async def build_context(
        self,
        user_id: str,
        query: str,
        *,
        session_id: str | None = None,
        max_chars: int = 4_000,
        per_type: int = 5,
        agent_id: str | None = None,
    ) -> str:
        """A prompt-ready block: the user's L0 profile, the memories most relevant to `query`
        (up to `per_type` of each enabled type), and the session so far — at most `max_chars`
        characters, its labels in the conversation's language."""
        types = self.settings.memory.extraction.enabled
        found = await self.search(
            user_id, query, types=types, limit=per_type * len(types), agent_id=agent_id
        )
        picked: list[ContextMemory] = []
        for memory_type in types:
            ranked = [m for m in found if m["memory_type"] == memory_type][:per_type]
            picked.extend(
                ContextMemory(memory_type, m["text"], _day(m.get("created_at"))) for m in ranked
            )
        history = await self.session_history(user_id, session_id) if session_id else ""
        profile = await self.profile(user_id)
        stored = (profile.get("fields") or {}) if profile is not None else {}
        fields = {name: str(entry["value"]) for name, entry in stored.items()}
        return context_block(
            profile=fields,
            memories=picked,
            history=history,
            language=detect_language([query, history]),
            max_chars=max_chars,
            custom_headings={
                name: heading_of(name, declared)
                for name, declared in self.settings.memory.custom_types.items()
            },
        )

    async def recent_turns(self, user_id: str, session_id: str, *, limit: int = 50) -> list[Turn]:
        """Short-term memory: the session's latest turns, oldest first."""
        return await (await self._reads()).recent_turns(
            self._memory_user(user_id), session_id, limit
        )

    async def session_history(
        self, user_id: str, session_id: str, *, max_chars_per_message: int = 500, snapshots: int = 5
    ) -> str:
        """The session so far, rendered for an LLM prompt: the last `snapshots` promoted
        snapshots' raw history (L1_RAW), then the turns not promoted yet; assistant and other
        speakers' messages cut to `max_chars_per_message`, the user's own kept whole."""
        return await (await self._reads()).session_history(
            self._memory_user(user_id),
            session_id,
            max_chars_per_message=max_chars_per_message,
            snapshots=snapshots,
        )

    async def snapshots(self, user_id: str, session_id: str | None = None) -> list[Snapshot]:
        """Promotion audit: the user's snapshots, with their rendered raw history and what each
        memory type's extraction did (`extractions.<type>`)."""
        return await (await self._reads()).snapshots(self._memory_user(user_id), session_id)

    async def saves(self, user_id: str) -> list[Save]:
        """What the user's direct saves did (memory ids, actions, cost), newest first."""
        return await (await self._reads()).saves(self._memory_user(user_id))

    async def profile(self, user_id: str) -> Profile | None:
        """The L0 basic profile of the user (never other people's facts)."""
        return await (await self._reads()).profile(self._memory_user(user_id))

    async def llm_usage(self, user_id: str) -> dict[str, LlmUsage]:
        """LLM calls and tokens per memory type for the user's snapshots and saves."""
        return await (await self._reads()).llm_usage(self._memory_user(user_id))

    def events(
        self, user_id: str, *, since: int | datetime | None = None, follow: bool = False
    ) -> AsyncIterator[MemoryEvent]:
        """The user's memory events from the log, oldest first: from the beginning, from a
        memories-topic offset, or from a time (`since`); then, with `follow`, live ones too.
        Events of forgotten memories are skipped (the log still holds them; see
        `memstream.sdk.event_feed`)."""
        return self._events(self._memory_user(user_id), since, follow)

    async def _events(
        self, user_id: str, since: int | datetime | None, follow: bool
    ) -> AsyncIterator[MemoryEvent]:
        from memstream.sdk.event_feed import memory_events

        erased = await (await self._reads()).erased_memory_ids(user_id)
        keys = await asyncio.to_thread(self._shared.keys.ring_if_configured)
        served = await self._served().settings()
        async for event in memory_events(
            served.kafka, user_id, since=since, follow=follow, erased=erased, keys=keys
        ):
            yield event

    # -- internals -----------------------------------------------------------------------------

    @property
    def _producer(self) -> EventProducer:
        return self._shared.producer

    def _served(self) -> ServedReadModels:
        if self._shared.reads is None:
            self._shared.reads = ServedReadModels(self.settings)
        return self._shared.reads

    async def _reads(self) -> ReadModel:
        """The read model the deployment serves (`memstream.sdk.served`)."""
        return await self._served().read_model()

    async def _query_embedder(self) -> Embedder:
        if self._shared.embedder is None:
            from memstream.providers.clients import embedder

            self._shared.embedder = await asyncio.to_thread(
                embedder, self.settings.embedding, self.settings.llm
            )
        return self._shared.embedder

    def _may_read(self, user_id: str) -> bool:
        """May this client read `user_id`'s data without its id being replaced (a deployed
        agent reads only its own)?"""
        scope = resolve_scope(user_id, self.principal, deployed_agent=self.deployed_agent)
        return scope.ignored_user_id is None

    def _memory_user(self, user_id: str) -> str:
        scope = resolve_scope(user_id, self.principal, deployed_agent=self.deployed_agent)
        if scope.ignored_user_id is not None:
            self.ignored_user_ids += 1
            log.warning(
                "service-account call: ignored end-user user_id %r, using %r",
                scope.ignored_user_id,
                scope.user_id,
            )
        return scope.user_id

    def _turn(
        self,
        user_id: str,
        session_id: str,
        agent_id: str | None,
        message: ChatMessage,
        occurred_at: datetime,
        now: datetime,
    ) -> TurnRecorded:
        return TurnRecorded(
            event_id=self._new_id(),
            occurred_at=occurred_at,
            recorded_at=now,
            user_id=user_id,
            session_id=session_id,
            agent_id=agent_id,
            role=message.role,
            name=message.name,
            tool_name=message.tool_name,
            content=message.content,
            principal=self.principal,
        )


def _day(value: Any) -> date | None:
    """A read-model timestamp's UTC day (None when there is none)."""
    return value.date() if isinstance(value, datetime) else None
