"""What every part of the SDK client shares: the settings, the acting principal, the producer,
the served read model and the query embedder (opened once, shared with `acting_as` views), and
how a call's user is resolved (docs/architecture.md, "Identity")."""

from __future__ import annotations

import asyncio
import copy
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from events.turns import Principal
from handlers.erasure_receipts import SDK_REQUESTER, requester
from handlers.identity import resolve_scope
from handlers.ports import Embedder
from memstream.config import Settings
from memstream.keystore.sealing import ClientKeys
from memstream.sdk.meaning import VectorCache
from memstream.sdk.producer import EventProducer
from memstream.sdk.read_model import ReadModel
from memstream.sdk.served import ServedReadModels
from streams.settings import Clock, utc_now

log = logging.getLogger(__name__)
POLL_SECONDS = 0.5
"""How often a `wait_for_…` call looks at the read model again."""


class MemoryNotFound(LookupError):
    """The user has no memory with this id (a forget request for it is not sent)."""


@dataclass
class Connections:
    """What a client and its `acting_as` views share: opened once, closed by the client."""

    producer: EventProducer
    keys: ClientKeys
    reads: ServedReadModels | None = None
    embedder: Embedder | None = None
    vectors: VectorCache = field(default_factory=VectorCache)
    """Recently embedded texts' vectors (`memstream.sdk.meaning`)."""


class ClientBase:
    """The connections and identity of a `MemoryClient` (`memstream.sdk.client`)."""

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
        self._shared = Connections(
            EventProducer(settings.kafka, keys.encode), keys, embedder=embedder
        )
        self._owner = True

    async def __aenter__(self) -> Self:
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

    def acting_as(self, principal: Principal, *, deployed_agent: bool = False) -> Self:
        """This client's calls on behalf of `principal`, recorded on every turn and save: the
        same producer, read model and embedder (the HTTP API makes one per request; see
        docs/architecture.md, "HTTP API and keys"). Closing the view closes nothing."""
        view = copy.copy(self)
        view.principal = principal
        view.deployed_agent = deployed_agent
        view.ignored_user_ids = 0
        view._owner = False
        return view

    @property
    def requested_by(self) -> str:
        """Who this client's forget requests say asked: the acting principal, else the
        client's requester."""
        return requester(self.principal, self._requester)

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
