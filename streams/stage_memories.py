"""What a memory type's stage knows of a user's memories, and how it decides about new ones.

`ExtractionStage` (`streams.extraction`) decides about a snapshot's or a save's new memories
here: their vectors from the batched embedder, the user's current memories of the type (the
read model's with the stage's own unprojected records laid over them, `handlers.known_state`),
and reconciliation (`handlers.reconcile`), whose ambiguous questions go to the LLM
(`handlers.reconcile_prompt`). Every call to the read model, the embedder and the LLM waits
outages out (`streams.retrying`). See docs/architecture.md, "Stages".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from events.memories import MemoryEvent, MemoryType, Provenance
from handlers import reconcile_prompt
from handlers.known_memory import KnownMemory, KnownMemoryFacts
from handlers.known_state import OwnRecord, with_own_records
from handlers.ports import ChatAnswer, StageReadModel
from handlers.reconcile import Answer, NewMemory, Question, Source, reconcile
from handlers.vectors import rounded
from streams.models import BatchedEmbedder, BoundedChat, MemoryModels
from streams.own_decisions import OwnDecisions
from streams.retrying import through_outages
from streams.settings import StreamSettings

log = logging.getLogger(__name__)


class StageMemories:
    """One stage's view of its type's memories, and its reconciliation of new ones."""

    def __init__(
        self,
        name: str,
        memory_type: MemoryType,
        settings: StreamSettings,
        models: MemoryModels,
        read_model: StageReadModel,
        own: OwnDecisions,
        llm: BoundedChat,
    ) -> None:
        self.name = name
        self.memory_type = memory_type
        self.settings = settings
        self.models = models
        self.read_model = read_model
        self.own = own
        self.llm = llm
        self.embedder = BatchedEmbedder(models.embedder)

    async def known(self, user_id: str) -> dict[str, KnownMemory]:
        """The user's current memories of this type: the read model's, then this stage's own
        records it may not hold yet (taken first: see `streams.own_decisions`)."""
        own: list[OwnRecord] = self.own.of_user(user_id)
        stored = await self.read(self.read_model.current_memories, user_id, self.memory_type)
        return with_own_records({m.memory_id: m for m in stored}, own)

    async def retired(self, user_id: str, known: list[KnownMemoryFacts]) -> list[KnownMemoryFacts]:
        """The user's memories of this type a consolidation retired (not current, so not in
        `known`): forgetting their sessions or the user erases them too."""
        held = {memory.memory_id for memory in known}
        read = partial(self.read_model.memory_facts, retired=True)
        facts: list[KnownMemoryFacts] = await self.read(read, user_id, self.memory_type)
        return [fact for fact in facts if fact.memory_id not in held]

    async def reconciled(
        self, news: list[NewMemory], source: Source, stamp: Provenance, what: str
    ) -> tuple[list[MemoryEvent], list[ChatAnswer]]:
        """The decisions about `news`, and the answers of the LLM calls they took."""
        answers: list[ChatAnswer] = []

        async def ask(questions: Sequence[Question]) -> list[Answer | None]:
            decided, given = await through_outages(
                partial(
                    reconcile_prompt.ask_all,
                    self.llm,
                    questions,
                    attempts=self.settings.llm_attempts,
                    max_answer_bytes=self.settings.extraction_limits.max_answer_bytes,
                    per_call=self.models.questions_per_call,
                ),
                f"{what}: asking about {len(questions)} ambiguous memories",
            )
            answers.extend(given)
            return decided

        known = await self.known(source.user_id)
        result = await reconcile(
            self.memory_type,
            news,
            known.values(),
            source=source,
            provenance=stamp,
            thresholds=self.models.thresholds,
            ask=ask,
            adds_only=self.models.adds_only,
        )
        for note in result.notes:
            log.info("%s: %s", what, note)
        return list(result.events), answers

    async def embedded(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """The texts' vectors, rounded as they are stored (`handlers.vectors.rounded`)."""
        return [rounded(vector) for vector in await self.embedder.embed(texts)]

    def provenance(self, prompt_version: str | None) -> Provenance:
        """What made this stage's decisions: the prompt's version, the models and extractor."""
        return Provenance(
            prompt_version=prompt_version,
            llm_model=self.models.llm_model,
            embedding_model=self.models.embedder.model_name,
            embedding_dimensions=self.models.embedder.dimension,
            extractor=self.models.extractor,
            extractor_digest=self.models.extractor_digest,
        )

    async def read(self, read: Callable[..., Any], *args: Any) -> Any:
        """A read-model call, in a thread, through outages."""
        call: Callable[[], Awaitable[Any]] = partial(asyncio.to_thread, read, *args)
        return await through_outages(call, f"{self.name}: reading the read model")
