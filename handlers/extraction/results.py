"""One extraction's result: every decision about one snapshot and memory type, in one record.

`extraction_result` turns what an extractor found (and its embeddings) into the
`SnapshotExtracted` record the extraction stage writes; the projector expands it, and the first
record for a snapshot and type wins (docs/architecture.md, "Ids and atomicity"). Every id in it
derives from the inputs: a memory's id from the snapshot, the type and what the memory says —
never from its position in an LLM answer, which a re-run LLM does not repeat. All its times are
the snapshot's event time, so a replay writes the same record.

This version only ADDs; reconciliation against existing memories comes next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from events.codec import EventTooLarge, encode
from events.memories import Evidence, MemoryAdded, MemoryContent, MemoryType, derived_id
from events.snapshots import SnapshotExtracted, SnapshotPromoted
from handlers.extraction.base import ExtractionOutcome

EMBEDDING_DIGITS = 7
"""Significant digits kept of each embedding component: float32 precision. Halves the bytes of a
result record (a 1,536-dimension vector is ~17 kB in JSON instead of ~30 kB) and loses nothing
a float32 embedding model produced."""


def memory_id_for(
    snapshot: SnapshotPromoted, memory_type: MemoryType, memory: MemoryContent
) -> str:
    """The id of a memory first learned from `snapshot`: from its subject and text."""
    return derived_id(
        "memory", memory_type, snapshot.event_id, memory.subject.casefold(), memory.text
    )


def extraction_result(
    snapshot: SnapshotPromoted,
    memory_type: MemoryType,
    found: ExtractionOutcome,
    embeddings: Sequence[Sequence[float]],
) -> SnapshotExtracted:
    """The record of one memory type's extraction of `snapshot`.

    A result too large for one record (`events.codec.MAX_EVENT_BYTES`) is refused like any
    invalid LLM output: it carries no decisions and says why in `failure`.
    """
    if len(found.memories) != len(embeddings):
        raise ValueError(f"{len(found.memories)} memories but {len(embeddings)} embeddings")
    evidence = Evidence(
        source="extraction",
        snapshot_id=snapshot.event_id,
        session_id=snapshot.session_id,
        observed_at=snapshot.occurred_at,
    )
    decisions = [
        MemoryAdded(
            event_id=derived_id("added", memory_id),
            occurred_at=snapshot.occurred_at,
            memory_id=memory_id,
            memory_type=memory_type,
            user_id=snapshot.user_id,
            agent_id=snapshot.agent_id,
            content=content,
            embedding=rounded(vector),
            evidence=evidence,
        )
        for content, vector in zip(found.memories, embeddings, strict=True)
        for memory_id in [memory_id_for(snapshot, memory_type, content)]
    ]
    result = SnapshotExtracted(
        event_id=result_id(snapshot.event_id, memory_type),
        occurred_at=snapshot.occurred_at,
        snapshot_id=snapshot.event_id,
        user_id=snapshot.user_id,
        session_id=snapshot.session_id,
        agent_id=snapshot.agent_id,
        memory_type=memory_type,
        decisions=tuple(decisions),
        attempts=found.attempts,
        failure=found.failure,
    )
    try:
        encode(result)
    except EventTooLarge as exc:
        failure = f"the extraction is too large for one record ({len(decisions)} memories): {exc}"
        return result.model_copy(update={"decisions": (), "failure": failure})
    return result


def result_id(snapshot_id: str, memory_type: MemoryType) -> str:
    """The event id of a snapshot's extraction result for one type: one per snapshot and type."""
    return derived_id("extracted", snapshot_id, memory_type)


def rounded(vector: Sequence[float]) -> tuple[float, ...]:
    """An embedding with `EMBEDDING_DIGITS` significant digits per component."""
    return tuple(float(f"{value:.{EMBEDDING_DIGITS}g}") for value in vector)


def already_extracted(extracted_seqs: Mapping[str, int], snapshot: SnapshotPromoted) -> bool:
    """Whether this stage extracted `snapshot` before, given the last extracted seq per session.

    Within one lifetime of the log a session's snapshots reach the stage in seq order, so a
    seq at or below the last one is a re-sent promotion (the window re-sends a snapshot after a
    crash between sending it and storing its state) or a redelivery.
    """
    return extracted_seqs.get(snapshot.session_id, -1) >= snapshot.seq
