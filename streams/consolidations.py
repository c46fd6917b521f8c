"""A memory type's stage answering consolidation requests (docs/architecture.md,
"Consolidation").

Wiring only: skip a request of other types or whose result is written already (kept as the
stage's own, or projected), read the user's current memories of the type (`known`: the read
model with the stage's own unprojected records laid over it), cluster them
(`handlers.consolidation`), ask the LLM about each cluster within the request's budget
(`handlers.consolidation_prompt`; every call waits outages out), embed the merged texts with the
stage's embedder, and return the one `MemoriesConsolidated` record the stage writes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from events.consolidations import MemoriesConsolidated, MemoryConsolidationRequested
from events.memories import MemoryType, Provenance
from handlers import consolidation_prompt
from handlers.consolidation import (
    Cluster,
    Verdict,
    clusters_of,
    consolidation_record,
    consolidation_result_id,
    requested_types,
)
from handlers.extraction.results import usage_of
from handlers.known_memory import KnownMemory
from handlers.ports import ChatAnswer, ChatModel, StageReadModel
from streams.own_decisions import OwnDecisions
from streams.retrying import through_outages

log = logging.getLogger(__name__)

Read = Callable[..., Awaitable[Any]]
"""A read-model call made in a thread, through outages
(`streams.stage_memories.StageMemories.read`)."""


async def consolidate(
    request: MemoryConsolidationRequested,
    *,
    memory_type: MemoryType,
    enabled: bool,
    own: OwnDecisions,
    read_model: StageReadModel,
    read: Read,
    known: Callable[[str], Awaitable[dict[str, KnownMemory]]],
    llm: ChatModel,
    embedded: Callable[[Sequence[str]], Awaitable[list[tuple[float, ...]]]],
    threshold: float,
    adds_only: bool,
    attempts: int,
    max_answer_bytes: int,
    provenance: Provenance,
) -> MemoriesConsolidated | None:
    """The record answering `request` for this type; None when the request is not for this
    type (`enabled`: whether the type's extraction is on, for a request naming no type) or is
    answered already. A type that only adds (`adds_only`) has no cluster to consolidate."""
    if memory_type not in requested_types(request, [memory_type] if enabled else []):
        return None
    event_id = consolidation_result_id(request.event_id, memory_type)
    if own.find(event_id) is not None or await read(read_model.consolidation_projected, event_id):
        return None
    what = f"consolidation {request.event_id} of {memory_type}"
    current = (await known(request.user_id)).values()
    clusters = (
        [] if adds_only else clusters_of(current, user_id=request.user_id, threshold=threshold)
    )

    async def ask(cluster: Cluster, calls: int) -> tuple[Verdict | None, list[ChatAnswer]]:
        asking = partial(
            consolidation_prompt.ask,
            llm,
            cluster,
            calls=calls,
            max_answer_bytes=max_answer_bytes,
        )
        verdict: tuple[Verdict | None, list[ChatAnswer]] = await through_outages(
            asking, f"{what}: asking about {len(cluster.members)} memories"
        )
        return verdict

    answered, answers = await consolidation_prompt.ask_within(
        clusters, max_calls=request.max_calls, attempts=attempts, ask=ask
    )
    merges = [
        (index, each.verdict.text)
        for index, each in enumerate(answered)
        if each.verdict is not None and each.verdict.action == "merge" and each.verdict.text
    ]
    vectors = await embedded([text for _, text in merges]) if merges else []
    result = consolidation_record(
        request,
        memory_type,
        answered,
        vectors={index: vector for (index, _), vector in zip(merges, vectors, strict=True)},
        provenance=provenance,
        usage=usage_of(answers),
        prompt_version=consolidation_prompt.PROMPT_VERSION,
    )
    log.info(
        "%s: %d clusters, %d asked, %d skipped, %d merged or superseded (%s)",
        what,
        result.clusters_found,
        result.clusters_asked,
        result.clusters_skipped,
        len(result.decisions),
        result.usage,
    )
    return result
