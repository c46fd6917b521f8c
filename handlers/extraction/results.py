"""Result records: everything one stage decided about one snapshot or one direct save.

`extraction_record` and `save_record` wrap the memory events reconciliation decided
(`handlers.reconcile`) into the one record the stage writes: a `SnapshotExtracted` per snapshot
and type, a `MemorySaved` per direct save. The projector expands a record, and the first record
per snapshot (or save) and type wins (docs/architecture.md, "Ids and atomicity"). All times in a
record are its source's event time, so a replay writes the same record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from events.codec import EventTooLarge, encode
from events.memories import Evidence, LLMUsage, MemoryEvent, MemoryType, derived_id
from events.saves import MemorySaved, MemorySaveRequested
from events.snapshots import SnapshotExtracted, SnapshotPromoted
from handlers.extraction.base import ExtractionOutcome
from handlers.ports import ChatAnswer
from handlers.reconcile import Source


def snapshot_source(snapshot: SnapshotPromoted) -> Source:
    """Memories extracted from `snapshot`: its user and agent, its evidence, its event time."""
    return Source(
        source_id=snapshot.event_id,
        user_id=snapshot.user_id,
        agent_id=snapshot.agent_id,
        evidence=Evidence(
            source="extraction",
            snapshot_id=snapshot.event_id,
            session_id=snapshot.session_id,
            observed_at=snapshot.occurred_at,
        ),
        occurred_at=snapshot.occurred_at,
    )


def save_source(request: MemorySaveRequested) -> Source:
    """A memory saved directly: the request's user, agent, session and event time."""
    return Source(
        source_id=request.event_id,
        user_id=request.user_id,
        agent_id=request.agent_id,
        evidence=Evidence(
            source="sdk", session_id=request.session_id, observed_at=request.occurred_at
        ),
        occurred_at=request.occurred_at,
    )


def extraction_record(
    snapshot: SnapshotPromoted,
    memory_type: MemoryType,
    outcome: ExtractionOutcome,
    decisions: Sequence[MemoryEvent],
    usage: LLMUsage,
    *,
    redrive_id: str | None = None,
) -> SnapshotExtracted:
    """The record of one memory type's extraction of `snapshot` (`redrive_id`: the operator's
    redrive it answers, which gives it its own id).

    A result too large for one record (`events.codec.MAX_EVENT_BYTES`) is refused like any
    invalid LLM output: it carries no decisions and says why in `failure`; so is one whose
    decisions share an event id (a collision is an error: the projector, deduplicating by id,
    would silently keep only the first).
    """
    record = SnapshotExtracted(
        event_id=result_id(snapshot.event_id, memory_type, redrive_id),
        occurred_at=snapshot.occurred_at,
        snapshot_id=snapshot.event_id,
        user_id=snapshot.user_id,
        session_id=snapshot.session_id,
        agent_id=snapshot.agent_id,
        memory_type=memory_type,
        decisions=tuple(decisions),
        attempts=outcome.attempts,
        failure=outcome.failure,
        usage=usage,
        redrive_id=redrive_id,
    )
    counts = Counter(decision.event_id for decision in decisions)
    repeated = sorted(event_id for event_id, count in counts.items() if count > 1)
    if repeated:
        failure = f"decision id collision: {', '.join(repeated)} decided more than once"
        return record.model_copy(update={"decisions": (), "failure": failure})
    try:
        encode(record)
    except EventTooLarge as exc:
        failure = f"the extraction is too large for one record ({len(decisions)} memories): {exc}"
        return record.model_copy(update={"decisions": (), "failure": failure})
    return record


def save_record(
    request: MemorySaveRequested, decisions: Sequence[MemoryEvent], usage: LLMUsage
) -> MemorySaved:
    """The record of one direct save's reconciliation."""
    return MemorySaved(
        event_id=save_result_id(request.event_id, request.memory_type),
        occurred_at=request.occurred_at,
        save_id=request.event_id,
        user_id=request.user_id,
        agent_id=request.agent_id,
        memory_type=request.memory_type,
        decisions=tuple(decisions),
        usage=usage,
    )


def result_id(snapshot_id: str, memory_type: MemoryType, redrive_id: str | None = None) -> str:
    """The event id of a snapshot's extraction result for one type: one per snapshot and type,
    and one more per operator redrive of the snapshot (docs/architecture.md, "Dead letters")."""
    if redrive_id is None:
        return derived_id("extracted", snapshot_id, memory_type)
    return derived_id("extracted", snapshot_id, memory_type, redrive_id)


def save_result_id(save_id: str, memory_type: MemoryType) -> str:
    """The event id of a direct save's result: one per save."""
    return derived_id("saved", save_id, memory_type)


def usage_of(answers: Sequence[ChatAnswer]) -> LLMUsage:
    """The calls and tokens of `answers`."""
    return LLMUsage(
        calls=len(answers),
        prompt_tokens=sum(answer.prompt_tokens for answer in answers),
        completion_tokens=sum(answer.completion_tokens for answer in answers),
    )


def already_extracted(extracted_seqs: Mapping[str, int], snapshot: SnapshotPromoted) -> bool:
    """Whether this stage extracted `snapshot` before, given the last extracted seq per session.

    Within one lifetime of the log a session's snapshots reach the stage in seq order, so a
    seq at or below the last one is a re-sent promotion (the window re-sends a snapshot after a
    crash between sending it and storing its state) or a redelivery.
    """
    return extracted_seqs.get(snapshot.session_id, -1) >= snapshot.seq
