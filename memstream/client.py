"""The Python SDK: record turns (a fast append to Kafka) and read memories back from MongoDB.

    async with MemoryClient(load_settings()) as memory:
        await memory.record("tim", "s1", [{"role": "user", "content": "I work at Stripe."}])
        await memory.flush("tim", "s1")
        memory.memories("tim")

No extraction runs on the write path; knowledge appears once the session's snapshot is extracted.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from pymongo import ASCENDING, DESCENDING, MongoClient

from events.codec import encode
from events.memories import USER_SUBJECT, MemoryContent, MemoryType, Owner
from events.saves import MemorySaveRequested
from events.turns import Principal, SessionFlushRequested, TurnRecorded
from handlers.identity import resolve_scope
from handlers.messages import ChatMessage, normalize_messages
from handlers.rendering import session_context
from memstream.config import Settings
from projections.store import DEAD_LETTERS, MEMORIES, PROFILES, SAVES, SNAPSHOTS, TURNS
from streams.settings import Clock, utc_now

log = logging.getLogger(__name__)
Document = dict[str, Any]


@contextmanager
def _quiet_producer_id_errors(quiet: bool) -> Iterator[None]:
    """While probing for an idempotent producer, aiokafka logs a broker's refusal of producer
    ids as an ERROR; with `auto` that refusal is expected and handled, so the line is dropped."""
    sender_log = logging.getLogger("aiokafka.producer.sender")

    def refusal(record: logging.LogRecord) -> bool:
        return "InitProducerIdRequest" not in record.getMessage()

    if quiet:
        sender_log.addFilter(refusal)
    try:
        yield
    finally:
        sender_log.removeFilter(refusal)


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
    ) -> None:
        if not settings.kafka.bootstrap_servers:
            raise ValueError("KAFKA_BOOTSTRAP_SERVERS is not set (is `memstream up` running?)")
        self.settings = settings
        self.principal = principal
        self.deployed_agent = deployed_agent
        self.ignored_user_ids = 0
        self._clock = clock
        self._new_id = new_id
        self._topics = settings.kafka.topics
        self._producer: AIOKafkaProducer | None = None
        self._mongo: MongoClient[Document] | None = None

    async def __aenter__(self) -> MemoryClient:
        await self.start()
        return self

    async def start(self) -> None:
        """Connect the producer (reads need no start: they connect to MongoDB on first use).

        The producer is idempotent where the broker supports it (`kafka.idempotent_producer`),
        so its own retries never write a turn twice; with `auto` it falls back to a plain
        producer on a broker without producer ids (Tansu). The window drops a re-sent turn by
        its event id in any case.
        """
        if self._producer is not None:
            return
        mode = self.settings.kafka.idempotent_producer
        if mode != "off":
            try:
                with _quiet_producer_id_errors(mode == "auto"):
                    self._producer = await self._started_producer_with(idempotent=True)
                return
            except KafkaError as exc:
                if mode == "on":
                    raise
                log.info("the broker refused an idempotent producer (%r); using a plain one", exc)
        self._producer = await self._started_producer_with(idempotent=False)

    async def _started_producer_with(self, *, idempotent: bool) -> AIOKafkaProducer:
        producer = AIOKafkaProducer(
            bootstrap_servers=self.settings.kafka.bootstrap_servers,
            acks="all",
            linger_ms=5,
            enable_idempotence=idempotent,
        )
        try:
            await producer.start()
        except BaseException:
            await producer.stop()
            raise
        return producer

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None
        if self._mongo is not None:
            self._mongo.close()
            self._mongo = None

    @property
    def _started_producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise RuntimeError("call `await client.start()` (or use `async with`) before writing")
        return self._producer

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

        Every message is validated first; a bad one raises `InvalidMessageError` (naming its index)
        before anything is sent.
        """
        normalized = normalize_messages(messages)
        user_id = self._memory_user(user_id)
        now = self._clock()
        turns = [
            self._turn(user_id, session_id, agent_id, message, occurred_at or now, now)
            for message in normalized
        ]
        futures = [
            await self._started_producer.send(
                self._topics.turns, encode(turn), key=turn.key.encode()
            )
            for turn in turns
        ]
        for future in futures:
            await future
        return turns

    async def flush(self, user_id: str, session_id: str) -> None:
        """End a session: promote its pending turns now (snapshot reason `flush`)."""
        user_id = self._memory_user(user_id)
        command = SessionFlushRequested(
            event_id=self._new_id(),
            occurred_at=self._clock(),
            user_id=user_id,
            session_id=session_id,
        )
        await self._started_producer.send_and_wait(
            self._topics.turns, encode(command), key=command.key.encode()
        )

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
    ) -> str:
        """Save a memory directly; returns the save's id.

        Any memory type, extracted automatically or not. The save goes through the same
        reconciliation as extracted memories (it may ADD, UPDATE or REINFORCE), in order with
        the user's snapshots; the outcome appears in the `saves` collection and `memories(…)`.
        Invalid content raises `pydantic.ValidationError` before anything is sent.
        """
        content = MemoryContent(
            subject=subject,
            owner=owner,
            text=text,
            category=category,
            attributes=dict(attributes or {}),
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
        )
        await self._started_producer.send_and_wait(
            self._topics.snapshots, encode(request), key=request.key.encode()
        )
        return request.event_id

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

    # -- reading (projections) -----------------------------------------------------------------

    @property
    def _db(self) -> Any:
        if self._mongo is None:
            if not self.settings.mongodb.uri:
                raise ValueError("MONGODB_URI is not set (is `memstream up` running?)")
            self._mongo = MongoClient(self.settings.mongodb.uri, tz_aware=True)
        return self._mongo[self.settings.mongodb.database]

    def memories(
        self, user_id: str, *, memory_type: MemoryType | None = None, history: bool = False
    ) -> list[Document]:
        """The user's current memories (every version with `history=True`), newest first."""
        query: Document = {"user_id": self._memory_user(user_id)}
        if memory_type:
            query["memory_type"] = memory_type
        if not history:
            query["status"] = "current"
        cursor = self._db[MEMORIES].find(query, {"embedding": 0})
        return list(cursor.sort([("created_at", DESCENDING), ("_id", ASCENDING)]))

    def recent_turns(self, user_id: str, session_id: str, *, limit: int = 50) -> list[Document]:
        """Short-term memory: the session's latest turns, oldest first."""
        query = {"user_id": self._memory_user(user_id), "session_id": session_id}
        cursor = self._db[TURNS].find(query).sort("occurred_at", DESCENDING).limit(limit)
        return list(reversed(list(cursor)))

    def session_history(
        self, user_id: str, session_id: str, *, max_chars_per_message: int = 500, snapshots: int = 5
    ) -> str:
        """The session so far, rendered for an LLM prompt (short-term memory as context).

        The last `snapshots` promoted snapshots' raw history (L1_RAW) is read back, the turns not
        promoted yet follow; assistant and other speakers' messages are cut to
        `max_chars_per_message`, the user's own messages are kept whole.
        """
        user_id = self._memory_user(user_id)
        query = {"user_id": user_id, "session_id": session_id}
        stored = self._db[SNAPSHOTS].find(query, {"raw_history": 1}).sort("seq", DESCENDING)
        raw = [s["raw_history"] for s in stored.limit(snapshots) if s.get("raw_history")]
        unpromoted = self._db[TURNS].find({**query, "snapshot_id": None}).sort("occurred_at", 1)
        pending = [
            ChatMessage(
                role=t["role"],
                content=t["content"],
                name=t.get("name"),
                tool_name=t.get("tool_name"),
            )
            for t in unpromoted
        ]
        return session_context(
            list(reversed(raw)), pending, max_chars_per_message=max_chars_per_message
        )

    def snapshots(self, user_id: str, session_id: str | None = None) -> list[Document]:
        """Promotion audit: the user's snapshots (with their rendered raw history)."""
        query: Document = {"user_id": self._memory_user(user_id)}
        if session_id:
            query["session_id"] = session_id
        return list(self._db[SNAPSHOTS].find(query).sort([("session_id", 1), ("seq", 1)]))

    def dead_letters(self, *, stage: str | None = None, limit: int = 100) -> list[Document]:
        """Records set aside with the reason (malformed input, invalid LLM output), newest first."""
        query: Document = {"stage": stage} if stage else {}
        cursor = self._db[DEAD_LETTERS].find(query).sort("dead_lettered_at", DESCENDING)
        return list(cursor.limit(limit))

    def saves(self, user_id: str) -> list[Document]:
        """The outcome of the user's direct saves (memory ids and actions), newest first."""
        query: Document = {"user_id": self._memory_user(user_id)}
        return list(self._db[SAVES].find(query).sort("at", DESCENDING))

    def llm_usage(self, user_id: str | None = None) -> dict[str, Document]:
        """LLM calls and tokens per memory type (extractions and direct saves), from the read
        model: every snapshot's and save's recorded cost, for one user or everyone."""
        query: Document = {} if user_id is None else {"user_id": self._memory_user(user_id)}
        totals: dict[str, Document] = {}

        def add(memory_type: str, usage: Document | None, kind: str) -> None:
            total = totals.setdefault(
                memory_type,
                {
                    "snapshots": 0,
                    "saves": 0,
                    "calls": 0,
                    "prompt_tokens": 0,
                    "completion_tokens": 0,
                },
            )
            total[kind] += 1
            for name in ("calls", "prompt_tokens", "completion_tokens"):
                total[name] += int((usage or {}).get(name, 0))

        for snapshot in self._db[SNAPSHOTS].find(query, {"extractions": 1}):
            for memory_type, record in (snapshot.get("extractions") or {}).items():
                add(memory_type, record.get("usage"), "snapshots")
        for save in self._db[SAVES].find(query, {"memory_type": 1, "usage": 1}):
            add(save["memory_type"], save.get("usage"), "saves")
        return totals

    def profile(self, user_id: str) -> Document | None:
        """The L0 basic profile of the user (never other people's facts)."""
        result: Document | None = self._db[PROFILES].find_one({"_id": self._memory_user(user_id)})
        return result
