"""Consolidation, decided: clusters of one user's current memories, and what an answer makes of
them (docs/architecture.md, "Consolidation").

Pure. A memory type's stage hands over the user's current memories of its type (the read model
with its own unprojected records laid over them, as reconciliation sees them):

* `clusters_of` groups them by subject first — exactly, after normalising case and spaces; and
  by owner and agent scope — and never across subjects or users: a memory of another user raises
  `ForeignMemory`, and every cluster is checked to hold one user's memories of one subject
  (`_checked`). Within a subject, memories whose vectors (of one embedding model) are at least
  `threshold` alike are linked; the connected components of two or more memories are the
  clusters, cut to `max_size` members, each listing its memories oldest first (by the time
  their current version was made, then by id). Order is deterministic (subject, then those), so
  a budget that stops part-way always stops at the same cluster.
* `decided` turns one cluster and its `Verdict` (`handlers.consolidation_prompt`) into the
  surviving memory's next version — a `MemoryUpdated` whose `reason` names the consolidation —
  and the `MemoryRetired` of every other member.
* `consolidation_record` is the one `MemoriesConsolidated` the stage writes per request and type.

Ids derive from the request's id, so a request read again decides the same record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from events.consolidations import (
    MAX_CLUSTERS,
    ClusterAction,
    ClusterOutcome,
    MemoriesConsolidated,
    MemoryConsolidationRequested,
    MemoryRetired,
)
from events.memories import (
    Evidence,
    LLMUsage,
    MemoryContent,
    MemoryDecision,
    MemoryType,
    MemoryUpdated,
    Provenance,
    derived_id,
)
from handlers.known_memory import KnownMemory
from handlers.vectors import cosine

MAX_CLUSTER_SIZE = 8
"""Memories shown to the LLM in one question at most (a larger component is cut in pieces)."""
MAX_DECISION_REASON_CHARS = 1_000


class ForeignMemory(ValueError):
    """A memory of another user (or a cluster across subjects) reached consolidation."""


@dataclass(frozen=True)
class Cluster:
    """Memories of one user, type and subject that may say the same or contradicting things."""

    subject: str
    members: tuple[KnownMemory, ...]

    @property
    def memory_ids(self) -> tuple[str, ...]:
        return tuple(m.memory_id for m in self.members)


@dataclass(frozen=True)
class Verdict:
    """What the LLM decided about one cluster: `survivor` is a member's index (0-based)."""

    action: Literal["merge", "supersede", "keep"]
    survivor: int | None = None
    text: str | None = None
    reason: str = ""


def consolidation_result_id(request_id: str, memory_type: MemoryType) -> str:
    """The event id of a consolidation's result: one per request and type."""
    return derived_id("consolidated", request_id, memory_type)


def requested_types(
    request: MemoryConsolidationRequested, enabled: Iterable[MemoryType]
) -> tuple[MemoryType, ...]:
    """The types `request` consolidates: those it names, or every enabled one."""
    return request.memory_types or tuple(enabled)


def subject_key(content: MemoryContent) -> str:
    """The subject as clusters compare it: case and runs of spaces do not matter."""
    return " ".join(content.subject.split()).casefold()


def clusters_of(
    memories: Iterable[KnownMemory],
    *,
    user_id: str,
    threshold: float,
    max_size: int = MAX_CLUSTER_SIZE,
) -> list[Cluster]:
    """The clusters among `user_id`'s current memories (module doc)."""
    if max_size < 2:
        raise ValueError("a cluster holds at least two memories")
    by_subject: dict[tuple[str, str, str], list[KnownMemory]] = {}
    for memory in sorted(memories, key=lambda m: m.memory_id):
        if memory.user_id is not None and memory.user_id != user_id:
            raise ForeignMemory(f"memory {memory.memory_id} is not a memory of {user_id}")
        key = (subject_key(memory.content), memory.content.owner, memory.agent_id or "")
        by_subject.setdefault(key, []).append(memory)
    clusters: list[Cluster] = []
    for (subject, _, _), members in sorted(by_subject.items()):
        for found in _components(members, threshold):
            component = sorted(found, key=_oldest_first)
            for start in range(0, len(component), max_size):
                piece = component[start : start + max_size]
                if len(piece) >= 2:
                    clusters.append(_checked(Cluster(subject, tuple(piece)), user_id))
    return clusters


def _oldest_first(memory: KnownMemory) -> tuple[datetime, str]:
    """A cluster's order: when each current version was made, then the id (a memory whose time
    is not known comes first)."""
    return (memory.learned_at or _UNKNOWN_TIME, memory.memory_id)


_UNKNOWN_TIME = datetime(1970, 1, 1, tzinfo=UTC)


def _components(members: Sequence[KnownMemory], threshold: float) -> list[list[KnownMemory]]:
    """The connected components (two or more memories) of `members` linked by similarity."""
    parent = list(range(len(members)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, left in enumerate(members):
        for j in range(i + 1, len(members)):
            right = members[j]
            if (
                left.embedding
                and left.embedding_model == right.embedding_model
                and cosine(left.embedding, right.embedding) >= threshold
            ):
                parent[root(j)] = root(i)
    groups: dict[int, list[KnownMemory]] = {}
    for i, memory in enumerate(members):
        groups.setdefault(root(i), []).append(memory)
    return [group for group in groups.values() if len(group) >= 2]


def _checked(cluster: Cluster, user_id: str) -> Cluster:
    """`cluster`, after checking it never spans users or subjects (raises `ForeignMemory`)."""
    subjects = {subject_key(m.content) for m in cluster.members}
    if subjects != {cluster.subject}:
        raise ForeignMemory(f"a cluster spans subjects {sorted(subjects)}")
    if any(m.user_id is not None and m.user_id != user_id for m in cluster.members):
        raise ForeignMemory(f"a cluster holds memories of another user than {user_id}")
    if len({m.agent_id for m in cluster.members}) > 1:
        raise ForeignMemory("a cluster spans agent scopes")
    if len(set(cluster.memory_ids)) != len(cluster.members):
        raise ValueError("a cluster lists a memory twice")
    return cluster


def decided(
    request: MemoryConsolidationRequested,
    memory_type: MemoryType,
    cluster: Cluster,
    verdict: Verdict,
    *,
    embedding: tuple[float, ...] | None,
    provenance: Provenance,
    prompt_version: str | None,
) -> tuple[MemoryUpdated, list[MemoryRetired]] | None:
    """The survivor's next version and the other members' retirements; None for `keep`.

    `embedding` is the merged text's (a merge); a supersede keeps the survivor's own. The
    version's provenance is the stage's with the consolidation prompt's version."""
    if verdict.action == "keep" or verdict.survivor is None:
        return None
    _checked(cluster, request.user_id)
    survivor = cluster.members[verdict.survivor]
    others = [m for i, m in enumerate(cluster.members) if i != verdict.survivor]
    content = survivor.content
    vector = survivor.embedding
    if verdict.action == "merge":
        if not verdict.text or embedding is None:
            raise ValueError("a merge needs its text and the text's vector")
        content = content.model_copy(update={"text": verdict.text})
        vector = embedding
    version = survivor.version + 1
    update = MemoryUpdated(
        event_id=derived_id("consolidated", request.event_id, survivor.memory_id, version),
        occurred_at=request.occurred_at,
        memory_id=survivor.memory_id,
        memory_type=memory_type,
        user_id=request.user_id,
        agent_id=survivor.agent_id,
        provenance=provenance.model_copy(
            update={"reconciled_by": "llm", "prompt_version": prompt_version}
        ),
        version=version,
        supersedes_version=survivor.version,
        content=content,
        embedding=vector,
        evidence=Evidence(source="sdk", observed_at=request.occurred_at),
        reason=consolidation_reason(request, verdict, [m.memory_id for m in others]),
        expires_at=survivor.expires_at,
    )
    retired = [
        MemoryRetired(
            event_id=derived_id("retired", request.event_id, other.memory_id, other.version),
            memory_id=other.memory_id,
            version=other.version,
            user_id=request.user_id,
            memory_type=memory_type,
            into=survivor.memory_id,
            into_version=version,
            action=verdict.action,
            occurred_at=request.occurred_at,
        )
        for other in others
    ]
    return update, retired


def consolidation_reason(
    request: MemoryConsolidationRequested, verdict: Verdict, others: Sequence[str]
) -> str:
    """The surviving version's `reason`: the consolidation, who asked, what it took in, why."""
    verb = "merged" if verdict.action == "merge" else "superseded"
    said = (
        f"consolidation {request.event_id} requested by {request.requested_by}: "
        f"{verb} {', '.join(others)}"
    )
    if verdict.reason:
        said = f"{said} ({verdict.reason})"
    if len(said) > MAX_DECISION_REASON_CHARS:
        said = said[: MAX_DECISION_REASON_CHARS - 1] + "…"
    return said


@dataclass(frozen=True)
class ClusterAnswer:
    """One cluster of a run and what was decided about it (None: not asked, the budget)."""

    cluster: Cluster
    verdict: Verdict | None
    asked: bool


def consolidation_record(
    request: MemoryConsolidationRequested,
    memory_type: MemoryType,
    answered: Sequence[ClusterAnswer],
    *,
    vectors: Mapping[int, tuple[float, ...]],
    provenance: Provenance,
    usage: LLMUsage,
    prompt_version: str | None,
) -> MemoriesConsolidated:
    """The one record the stage writes for `request` and its type; `vectors` are the merged
    texts' by the index of their cluster in `answered`."""
    decisions: list[MemoryDecision] = []
    retired: list[MemoryRetired] = []
    outcomes: list[ClusterOutcome] = []
    for index, each in enumerate(answered):
        action: ClusterAction
        survivor: str | None = None
        if not each.asked:
            action = "skipped"
        elif each.verdict is None:
            action = "unanswered"
        else:
            action = each.verdict.action
            made = decided(
                request,
                memory_type,
                each.cluster,
                each.verdict,
                embedding=vectors.get(index),
                provenance=provenance,
                prompt_version=prompt_version,
            )
            if made is not None:
                update, gone = made
                decisions.append(update)
                retired.extend(gone)
                survivor = update.memory_id
        outcomes.append(
            ClusterOutcome(memory_ids=each.cluster.memory_ids, action=action, survivor=survivor)
        )
    asked = sum(1 for each in answered if each.asked)
    return MemoriesConsolidated(
        event_id=consolidation_result_id(request.event_id, memory_type),
        occurred_at=request.occurred_at,
        consolidation_id=request.event_id,
        user_id=request.user_id,
        memory_type=memory_type,
        requested_by=request.requested_by,
        reason=request.reason,
        max_calls=request.max_calls,
        requested_types=request.memory_types,
        decisions=tuple(decisions),
        retired=tuple(retired),
        clusters=tuple(outcomes[:MAX_CLUSTERS]),
        clusters_found=len(answered),
        clusters_asked=asked,
        clusters_skipped=len(answered) - asked,
        usage=usage,
        prompt_version=prompt_version if asked else None,
        unchanged=None if decisions else _why_unchanged(answered),
    )


def _why_unchanged(answered: Sequence[ClusterAnswer]) -> str:
    if not answered:
        return "no cluster of similar memories of one subject"
    if not any(each.asked for each in answered):
        return "the budget of LLM calls allowed no question"
    return "every cluster asked about was kept as distinct facts (or got no valid answer)"
