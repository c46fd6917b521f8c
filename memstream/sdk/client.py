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
"Forgetting"). Those calls are in `memstream.sdk.forgetting`, rollback and consolidation in
`memstream.sdk.corrections`, the connections they share in `memstream.sdk.client_base`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import date, datetime
from typing import Any, Unpack

from events.memories import USER_SUBJECT, MemoryContent, MemoryEvent, MemoryType, Owner
from events.saves import MemorySaveRequested
from events.turns import SessionFlushRequested, TurnRecorded
from handlers.context import ContextMemory, context_block
from handlers.extraction.custom import heading_of
from handlers.messages import ChatMessage, normalize_messages
from handlers.recall import PAST_MESSAGES, PastMessage, recalled
from handlers.rendering import detect_language
from handlers.search import SearchMode
from memstream.sdk.client_base import MemoryNotFound
from memstream.sdk.corrections import CorrectionCalls
from memstream.sdk.forgetting import ForgettingCalls
from memstream.sdk.meaning import recalled_by_meaning
from memstream.sdk.memory_types import attributes_for
from memstream.sdk.results import (
    LlmUsage,
    Memory,
    MemoryVersion,
    Profile,
    Save,
    SearchHit,
    Snapshot,
    Turn,
)
from memstream.sdk.search_filters import SearchFilters, as_filters

__all__ = ["MemoryClient", "MemoryNotFound"]

PAST_MESSAGES_SCANNED = 2_000
"""How many of the user's latest turns a `build_context` call ranks for its past messages: a
query's cost is bounded by this, not by the user's whole history."""


class MemoryClient(ForgettingCalls, CorrectionCalls):
    """Records conversations and reads memories for explicit `user_id`/`session_id` pairs."""

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
        past_messages: int = PAST_MESSAGES,
    ) -> str:
        """A prompt-ready block: the user's L0 profile, the memories most relevant to `query`
        (up to `per_type` of each enabled type; 0: none), up to `past_messages` of the user's
        messages from other sessions that match `query` best (0: none; `handlers.recall`), and
        the session so far — at most `max_chars` characters, its labels in the conversation's
        language."""
        types = self.settings.memory.extraction.enabled
        found, history, profile, recalled_messages = await asyncio.gather(
            self._context_memories(user_id, query, types, per_type, agent_id),
            self.session_history(user_id, session_id) if session_id else _no_history(),
            self.profile(user_id),
            self._past_messages(user_id, query, session_id, agent_id, past_messages),
        )
        picked: list[ContextMemory] = []
        for memory_type in types:
            ranked = [m for m in found if m["memory_type"] == memory_type][:per_type]
            picked.extend(
                ContextMemory(memory_type, m["text"], _day(m.get("created_at"))) for m in ranked
            )
        stored = (profile.get("fields") or {}) if profile is not None else {}
        fields = {name: str(entry["value"]) for name, entry in stored.items()}
        return context_block(
            profile=fields,
            memories=picked,
            past_messages=recalled_messages,
            history=history,
            language=detect_language([query, history]),
            max_chars=max_chars,
            custom_headings={
                name: heading_of(name, declared)
                for name, declared in self.settings.memory.custom_types.items()
            },
        )

    async def _context_memories(
        self,
        user_id: str,
        query: str,
        types: Sequence[MemoryType],
        per_type: int,
        agent_id: str | None,
    ) -> list[SearchHit]:
        """`build_context`'s memories: the search's best for `query`, enough for `per_type` of
        each type; none (no search) when `per_type` is 0."""
        if per_type <= 0:
            return []
        return await self.search(
            user_id, query, types=types, limit=per_type * len(types), agent_id=agent_id
        )

    async def _past_messages(
        self, user_id: str, query: str, session_id: str | None, agent_id: str | None, limit: int
    ) -> list[PastMessage]:
        """`build_context`'s past messages: the user's latest turns outside the session, ranked
        for `query` by keywords, and when `memory.rerank_past_messages` is on the best
        `RERANK_POOL` of them reranked by their meaning's similarity to `query`
        (`handlers.recall`, `memstream.sdk.meaning`), off the event loop; none when `limit`
        is 0."""
        if limit <= 0:
            return []
        earlier = await (await self._reads()).past_messages(
            self._memory_user(user_id),
            other_than=session_id,
            agent_id=agent_id,
            scanned=PAST_MESSAGES_SCANNED,
        )
        if not self.settings.memory.rerank_past_messages:
            return await asyncio.to_thread(recalled, query, earlier, limit)
        embedder = await self._query_embedder()
        return await asyncio.to_thread(
            recalled_by_meaning, embedder, self._shared.vectors, query, earlier, limit
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


async def _no_history() -> str:
    """The session so far when `build_context` is given no session: none."""
    return ""
