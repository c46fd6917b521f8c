"""What the clients' reads return, typed (docs/quickstart.md, "What the reads return").

The results are the read model's documents: plain dicts at run time, typed here as
`TypedDict`s so an editor and mypy know their fields. `MemoryClient`, `SyncMemoryClient` and
`HttpMemoryClient` return the same types.

`from_json` turns the HTTP API's JSON into these types: its ISO 8601 times become `datetime`s,
so the HTTP client's results compare and sort like the others'.

A key marked `NotRequired` is absent from documents written before the field existed, or
present only for some kinds of result (a receipt's `session_id` only for a session's).

`Document` is the untyped form, for the read model's raw documents the SDK works on inside.

No `from __future__ import annotations` here: with it, Python 3.11 reads every key of a
`TypedDict` as required (`__required_keys__`), `NotRequired` or not.
"""

import types
import typing
from datetime import datetime
from typing import Any, Literal, NotRequired, TypedDict

from events.memories import MemoryType, Owner
from events.snapshots import PromotionReason
from events.turns import Role

Document = dict[str, Any]
"""A read-model document as MongoDB returns it, untyped: queries, and documents before the SDK
hands them out typed."""

MemoryStatus = Literal["current", "superseded", "retired"]
"""`retired`: a consolidation took the memory into another one (`retired_into` says which)."""


class Provenance(TypedDict):
    """What made a memory version: the prompt, the models, how it was reconciled."""

    prompt_version: str | None
    llm_model: str | None
    embedding_model: str
    embedding_dimensions: int
    reconciled_by: Literal["rule", "llm"]
    extractor: NotRequired[str | None]
    """The named extractor that decided (absent from versions written before names)."""
    extractor_digest: NotRequired[str | None]


class Evidence(TypedDict):
    """One observation behind a memory: the event, and the snapshot or save it came from."""

    event_id: str
    source: str
    snapshot_id: str | None
    session_id: str | None
    observed_at: datetime


class Supersession(TypedDict):
    """The version that replaced a superseded one, and why."""

    version: int
    event_id: str
    text: str
    reason: str | None
    at: datetime


class Retirement(TypedDict):
    """The memory a consolidation retired this one into (`consolidate()`)."""

    memory_id: str
    version: int
    action: Literal["merge", "supersede"]
    event_id: str
    consolidation_id: str
    at: datetime


class MemoryFields(TypedDict):
    """What every read of a memory version shows: a `Memory` and a `SearchHit` alike (the
    search index keeps exactly these, `memstream.sdk.search_index.INDEXED_FIELDS`)."""

    _id: str
    """`<memory_id>:v<version>`."""
    memory_id: str
    version: int
    status: MemoryStatus
    memory_type: MemoryType
    user_id: str
    agent_id: str | None
    subject: str
    owner: Owner
    text: str
    category: str | None
    attributes: dict[str, Any]
    reinforcement_count: int
    created_at: datetime
    updated_at: datetime
    embedding_model: str | None


class Memory(MemoryFields):
    """One version of a memory (`memories()`: the current versions, or every one with
    `history=True`)."""

    provenance: Provenance | None
    superseded_by: Supersession | None
    retired_into: NotRequired[Retirement | None]
    """Set on a retired memory's last version, None on the others (absent from versions
    written before consolidation existed)."""
    evidence: list[Evidence]
    created_by_event: str
    expires_at: NotRequired[datetime | None]
    fingerprint: NotRequired[str]
    """The written content's hash (the read model notices an id reused for other content)."""


class MemoryLogEntry(TypedDict):
    """A memory event as the read model logs it (`event`: the event's JSON)."""

    _id: str
    event_type: str
    memory_id: str
    memory_type: MemoryType
    user_id: str
    occurred_at: datetime
    event: dict[str, Any]
    fingerprint: NotRequired[str]


class Rollback(TypedDict):
    """What a rollback request did: the version it restored, who asked and why, or why it
    was refused (`rollback()`; in `history()`, on the version a rollback made)."""

    _id: str
    """The id of the rollback's result record."""
    rollback_id: str
    """The id `rollback()` returned."""
    user_id: str
    memory_type: MemoryType
    memory_id: str
    memory_ids: list[str]
    to_version: int
    requested_by: str
    reason: str
    refused: str | None
    """Why nothing was restored (None: `versions` holds the restoring version)."""
    decision_ids: list[str]
    versions: list[int]
    at: datetime
    fingerprint: NotRequired[str]


class MemoryVersion(Memory):
    """A version in `history()`: the memory, the event that made it and those that
    reinforced it, and the rollback that made it, if one did."""

    created_by: MemoryLogEntry | None
    reinforced_by: list[MemoryLogEntry]
    rolled_back_by: Rollback | None


class SearchHit(MemoryFields):
    """A current memory that answers a query, with its scores (`search()`)."""

    score: float
    """The fused score results are ranked by (`mode`'s: hybrid, vector or keyword)."""
    vector_score: float | None
    """None when the memory has no vector of the query's embedding model."""
    keyword_score: float


class ErasureReceipt(TypedDict):
    """What the stages erased for one forget request: ids and counts, never content
    (`erasure()`, `erasures()`, `wait_for_erasure()`)."""

    _id: str
    request_id: str
    kind: Literal["memory", "session", "user", "expiry"]
    user_id: str
    complete: bool
    """Every stage that must act on the request has left its step."""
    expected_steps: dict[str, int]
    seen_steps: dict[str, int]
    steps: NotRequired[dict[str, dict[str, Any]]]
    keys_destroyed: NotRequired[dict[str, int]]
    requested_by: NotRequired[str]
    reason: NotRequired[str]
    requested_at: NotRequired[datetime]
    session_id: NotRequired[str]
    memory_id: NotRequired[str]
    memory_type: NotRequired[MemoryType]


class ProfileField(TypedDict):
    """One profile field: its value, and the memory and event that set it."""

    value: Any
    event_id: str
    memory_id: str | None
    at: datetime


class Profile(TypedDict):
    """The user's L0 basic profile (`profile()`)."""

    _id: str
    user_id: str
    fields: NotRequired[dict[str, ProfileField]]
    updated_at: NotRequired[datetime]


class LlmCost(TypedDict):
    """What one extraction or one save cost in LLM calls and tokens."""

    calls: int
    prompt_tokens: int
    completion_tokens: int


class LlmUsage(TypedDict):
    """LLM calls and tokens of one memory type, over the snapshots and saves it handled
    (`llm_usage()`)."""

    snapshots: int
    saves: int
    calls: int
    prompt_tokens: int
    completion_tokens: int


class TurnPrincipal(TypedDict):
    """Who sent a turn: an end user, an application, or a deployed agent's service account."""

    kind: Literal["end_user", "application", "service_account"]
    id: str


class Turn(TypedDict):
    """One message of a session, kept as short-term memory (`recent_turns()`)."""

    _id: str
    """The turn's event id."""
    user_id: str
    session_id: str
    agent_id: str | None
    role: Role
    name: str | None
    tool_name: str | None
    content: str
    occurred_at: datetime
    recorded_at: datetime
    principal: TurnPrincipal | None
    snapshot_id: str | None
    """The snapshot the turn was promoted in; None while it waits in the window."""
    partition: NotRequired[int | None]
    """The turns-topic partition it was read from (absent from turns projected before)."""
    fingerprint: NotRequired[str]


class SnapshotExtraction(TypedDict):
    """What one memory type's extraction did with a snapshot: the memories it decided about,
    its actions, its attempts and cost, or why it failed."""

    event_id: str
    memory_ids: list[str]
    decision_ids: list[str]
    decisions: int
    actions: list[str]
    """The decisions' event types (`MemoryAdded`, `MemoryUpdated`, `MemoryReinforced`)."""
    attempts: int
    failure: str | None
    usage: LlmCost
    at: datetime
    redrive_id: NotRequired[str | None]
    """The operator's redrive that produced it (absent from records written before)."""
    fingerprint: NotRequired[str]


class Snapshot(TypedDict):
    """A run of a session's turns promoted together, with its rendered raw history and what
    each memory type's extraction did (`snapshots()`).

    Only `_id`, `user_id` and `session_id` are always there: an extraction's record may be
    projected before its snapshot (then the promotion's fields are missing yet), and a
    snapshot before any extraction (then `extractions` is)."""

    _id: str
    """The snapshot's id."""
    user_id: str
    session_id: str
    agent_id: NotRequired[str | None]
    seq: NotRequired[int]
    """The snapshot's place among the session's (a display order, not an identity)."""
    reason: NotRequired[PromotionReason]
    turn_ids: NotRequired[list[str]]
    turn_count: NotRequired[int]
    raw_history: NotRequired[str | None]
    """The turns rendered as a multi-speaker transcript (None when they cannot be)."""
    first_turn_at: NotRequired[datetime]
    last_turn_at: NotRequired[datetime]
    promoted_at: NotRequired[datetime]
    extractions: NotRequired[dict[MemoryType, SnapshotExtraction]]


class Save(TypedDict):
    """What a direct save did: the memories it decided about, its actions and cost
    (`saves()`)."""

    _id: str
    """The id of the save's result record."""
    save_id: str
    """The id `save()` returned."""
    user_id: str
    agent_id: str | None
    memory_type: MemoryType
    memory_ids: list[str]
    decision_ids: list[str]
    actions: list[str]
    """The decisions' event types (`MemoryAdded`, `MemoryUpdated`, `MemoryReinforced`)."""
    usage: LlmCost
    at: datetime
    fingerprint: NotRequired[str]


class ConsolidatedCluster(TypedDict):
    """One cluster of a consolidation run and what became of it."""

    memory_ids: list[str]
    action: Literal["merge", "supersede", "keep", "unanswered", "skipped"]
    survivor: str | None


class Consolidation(TypedDict):
    """What one memory type's consolidation run did for a request: who asked and why, the
    clusters and what became of them, the memories it changed, what it cost
    (`consolidate()`, `consolidation_result()`)."""

    _id: str
    """The id of the run's result record (one per request and memory type)."""
    consolidation_id: str
    """The id `consolidate()` returned."""
    user_id: str
    memory_type: MemoryType
    requested_by: str
    reason: str
    max_calls: int
    requested_types: list[MemoryType]
    """Every type the request asked for (one run each; empty: the enabled ones)."""
    memory_ids: list[str]
    decision_ids: list[str]
    survivors: list[dict[str, Any]]
    """`memory_id` and `version` of each surviving memory's new version."""
    retired: list[dict[str, Any]]
    """`memory_id`, `version`, `into`, `action` and `event_id` of each memory retired."""
    clusters: list[ConsolidatedCluster]
    clusters_found: int
    clusters_asked: int
    clusters_skipped: int
    usage: LlmCost
    prompt_version: str | None
    unchanged: str | None
    """Why the run changed nothing (None: it merged or superseded something)."""
    at: datetime
    fingerprint: NotRequired[str]


class TurnsReceipt(TypedDict):
    """What the HTTP API answers to recorded turns: the memory user and the turns' ids
    (`HttpMemoryClient.record()`)."""

    user_id: str
    session_id: str
    turn_ids: list[str]


class FlushReceipt(TypedDict):
    """What the HTTP API answers to a session's flush (`HttpMemoryClient.flush()`)."""

    user_id: str
    session_id: str


def consolidation_complete(runs: list[Consolidation]) -> bool:
    """Whether `runs` (of one consolidation request) hold a run of every type it asked for."""
    wanted = set(runs[0]["requested_types"]) if runs else set()
    return bool(runs) and wanted <= {run["memory_type"] for run in runs}


def from_json(value: Any, kind: Any) -> Any:
    """`value`, decoded from JSON, with every field `kind` declares a `datetime` parsed from
    its ISO 8601 text; `kind` is one of the types above, or a list or dict of them. Keys `kind`
    does not declare are kept as they are."""
    if value is None:
        return None
    origin = typing.get_origin(kind)
    if kind is datetime:
        return datetime.fromisoformat(value) if isinstance(value, str) else value
    if origin in (typing.Union, types.UnionType):
        members = [member for member in typing.get_args(kind) if member is not type(None)]
        return from_json(value, members[0]) if len(members) == 1 else value
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(kind)
        return [from_json(element, item) for element in value]
    if origin is dict and isinstance(value, dict):
        _, item = typing.get_args(kind)
        return {key: from_json(element, item) for key, element in value.items()}
    if typing.is_typeddict(kind) and isinstance(value, dict):
        fields = typing.get_type_hints(kind)
        return {key: from_json(element, fields.get(key, Any)) for key, element in value.items()}
    return value
