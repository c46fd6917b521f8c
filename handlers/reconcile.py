"""Reconciliation: what newly learned memories mean for what is already known.

Each memory type's stage reconciles the new memories of one source — a snapshot's extraction,
or a direct save through the SDK — against the *current* memories of the same type and scope
(`user_id`, and `agent_id` when given), in two steps (docs/architecture.md, "Reconciliation"):

1. **Plan** each new memory against what was known before the source:
   - **candidates** are the known memories with the *same subject* — never another subject
     ("The user likes coffee" and "John likes coffee" stay two memories) — whose vector comes
     from the same embedding model (vectors of different models are never compared), ranked by
     cosine similarity to the new memory;
   - **decide by wording, without an LLM call**, when the new memory's words open a candidate
     (REINFORCE it) or a candidate's words open the new memory, which says more (UPDATE it)
     (`handlers.restatement`; not for taxonomic terms);
   - **REINFORCE without an LLM call** when the best candidate is at least `reinforce` similar
     (a near-duplicate restates it);
   - **ask the LLM** when candidates are at least `ask` similar (the ambiguous middle band);
   - **ADD** otherwise.
2. **Ask in waves**: the new memories of a source that cannot change each other's plan — not
   similar enough to be each other's candidate nor opening each other's words, no candidate in
   common — are planned against the same known memories and their ambiguous ones asked
   together (the `ask` port gets every question of a wave at once, so a snapshot costs one
   call per type, not one per memory); a memory entangled with an earlier one of its source
   waits for the next wave and is planned against the memories as that one left them. The
   decisions are the ones asking one memory at a time in the source's order would give: a
   chain said in one snapshot ("lived in Lisbon, then moved to Porto") UPDATEs step by step,
   and a source without such chains asks once.
   An answer may be ADD, or UPDATE / REINFORCE naming one of the candidates it was shown;
   anything else is an ADD, with the reason noted. A new memory that an earlier one of the
   same source already says (the same id) is a REINFORCE of it.

`reconcile` decides and writes the memory events, and applies each to the known memories with
`handlers.known_memory.evolve`, the one place that says how an event changes them;
`handlers.subjects` says who a memory is about. Pure but for the `ask` port (the LLM), which
the caller passes in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from events.memories import (
    Evidence,
    MemoryAdded,
    MemoryContent,
    MemoryEvent,
    MemoryReinforced,
    MemoryType,
    MemoryUpdated,
    Provenance,
    derived_id,
)
from handlers.known_memory import KnownMemory, evolve
from handlers.restatement import extends, one_opens_the_other, restates
from handlers.subjects import merged_attributes, same_subject, subject_key
from handlers.vectors import cosine

Action = Literal["ADD", "UPDATE", "REINFORCE"]


@dataclass(frozen=True)
class Thresholds:
    """Cosine similarities that separate REINFORCE, ask-the-LLM and ADD (module doc)."""

    reinforce: float
    ask: float
    max_options: int = 3
    consolidate: float | None = None
    """Consolidation's: current memories of one subject at or above it are one cluster
    (`handlers.consolidation`); None: `ask` (the band where reconciliation asks the LLM)."""

    def __post_init__(self) -> None:
        if not -1.0 <= self.ask <= self.reinforce <= 1.0:
            raise ValueError("thresholds must satisfy -1 <= ask <= reinforce <= 1")
        if self.consolidate is not None and not -1.0 <= self.consolidate <= 1.0:
            raise ValueError("the consolidation threshold must be between -1 and 1")
        if self.max_options < 1:
            raise ValueError("max_options must be at least 1")

    @property
    def cluster(self) -> float:
        """The similarity at which consolidation puts two memories in one cluster."""
        return self.ask if self.consolidate is None else self.consolidate


@dataclass(frozen=True)
class NewMemory:
    """A memory to reconcile: what it says and its vector."""

    content: MemoryContent
    embedding: tuple[float, ...]


@dataclass(frozen=True)
class Option:
    """A known memory a new one may restate or replace, and how similar the two are."""

    memory: KnownMemory
    similarity: float


@dataclass(frozen=True)
class Answer:
    """The LLM's decision about one new memory (already parsed)."""

    action: Action
    target: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class Question:
    """One ambiguous new memory and the candidates the LLM is shown for it."""

    new: NewMemory
    options: tuple[Option, ...]


Ask = Callable[[Sequence[Question]], Awaitable[Sequence[Answer | None]]]
"""The LLM port: given the questions of one source, an answer for each, in order (None: no
usable one)."""


@dataclass(frozen=True)
class Source:
    """Where new memories come from (a snapshot or a direct save): whose they are, the evidence
    every decision attaches, and the event time all of them carry."""

    source_id: str
    user_id: str
    agent_id: str | None
    evidence: Evidence
    occurred_at: datetime


@dataclass(frozen=True)
class Reconciliation:
    """The memory events reconciliation decided, the known memories after them, and a note
    per new memory saying what happened to it and why."""

    events: tuple[MemoryEvent, ...]
    known: tuple[KnownMemory, ...]
    notes: tuple[str, ...]
    asked: int


def options_for(
    memory_type: MemoryType,
    new: NewMemory,
    known: Iterable[KnownMemory],
    *,
    embedding_model: str,
) -> list[Option]:
    """The known memories a new one may restate or replace, most similar first."""
    options = [
        Option(memory, cosine(new.embedding, memory.embedding))
        for memory in known
        if memory.embedding_model == embedding_model
        and same_subject(memory_type, memory.content, new.content)
    ]
    return sorted(options, key=lambda o: (-o.similarity, o.memory.memory_id))


async def reconcile(
    memory_type: MemoryType,
    news: Sequence[NewMemory],
    known: Iterable[KnownMemory],
    *,
    source: Source,
    provenance: Provenance,
    thresholds: Thresholds,
    ask: Ask,
    adds_only: bool = False,
) -> Reconciliation:
    """Decide what each new memory of one source means for the known ones of its scope and type
    (module doc: plan, ask once, decide in order). With `adds_only` (a custom type declared
    `reconcile: false`) every new memory is added, asking nothing; only one that repeats a
    memory its own source already added reinforces it, so no id collides.

    Only known memories of the source's user and agent are ever candidates, whatever the caller
    passes in `known` (docs/architecture.md, "Identity")."""
    scope = {memory.memory_id: memory for memory in known if in_scope(memory, source)}
    events: list[MemoryEvent] = []
    notes: list[str] = []
    asked = 0
    waiting = list(news)
    while waiting:
        plans = [
            _Plan(("ADD", None, "this memory type only adds"))
            if adds_only
            else _plan(memory_type, new, scope.values(), thresholds, provenance.embedding_model)
            for new in waiting
        ]
        wave, waiting = _wave(memory_type, waiting, plans, thresholds)
        questions = [Question(new, plan.band) for new, plan in wave if plan.band]
        answers = list(await ask(questions)) if questions else []
        if len(answers) != len(questions):
            raise ValueError(f"{len(questions)} questions asked, {len(answers)} answers given")
        asked += len(questions)
        pending = iter(answers)
        for new, plan in wave:
            by: Literal["rule", "llm"] = "llm" if plan.band else "rule"
            action, target, reason = _settled(plan.band, next(pending)) if plan.band else plan.rule
            if target is None:
                restated = _restating(memory_type, new, source, scope)
                action, target, reason = restated or (action, None, reason)
            stamped = provenance.model_copy(update={"reconciled_by": by})
            replaced = target.memory if target else None
            event = _event(memory_type, action, new, replaced, source, reason, stamped)
            events.append(event)
            scope = evolve(scope, [event])
            similarity = f" ({target.similarity:.3f})" if target else ""
            notes.append(f"{action} {event.memory_id}{similarity}: {reason}")
    return Reconciliation(tuple(events), tuple(scope.values()), tuple(notes), asked)


def _wave(
    memory_type: MemoryType,
    waiting: Sequence[NewMemory],
    plans: Sequence[_Plan],
    thresholds: Thresholds,
) -> tuple[list[tuple[NewMemory, _Plan]], list[NewMemory]]:
    """The waiting memories decided in this wave (each with its plan), in order, and those
    that wait for the next: a memory waits when it is entangled with an earlier one of its
    source that is not decided yet (it waits, or is in this wave)."""
    wave: list[tuple[NewMemory, _Plan]] = []
    later: list[tuple[NewMemory, _Plan]] = []
    for new, plan in zip(waiting, plans, strict=True):
        earlier = (*wave, *later)
        if any(_entangled(memory_type, (new, plan), other, thresholds) for other in earlier):
            later.append((new, plan))
        else:
            wave.append((new, plan))
    return wave, [new for new, _ in later]


def _entangled(
    memory_type: MemoryType,
    one: tuple[NewMemory, _Plan],
    other: tuple[NewMemory, _Plan],
    thresholds: Thresholds,
) -> bool:
    """Whether deciding one of two new memories of a source can change the other's plan: they
    share a candidate (an UPDATE of it changes what the other is compared with), or each could
    be the other's candidate once decided (same subject and at least `ask` similar, or one's
    words opening the other's; any two terms of the same name, whose REINFORCE merges aliases
    that decide what is the same subject)."""
    (new, plan), (new_other, plan_other) = one, other
    if plan.touched & plan_other.touched:
        return True
    if not same_subject(memory_type, new.content, new_other.content):
        return False
    return (
        memory_type == "taxonomic"
        or cosine(new.embedding, new_other.embedding) >= thresholds.ask
        or one_opens_the_other(new.content.text, new_other.content.text)
    )


@dataclass(frozen=True)
class _Plan:
    """What the rules say about one new memory before anything of its source is decided: a
    decision (`rule`), or the candidates to ask the LLM about (`band`)."""

    rule: tuple[Action, Option | None, str]
    band: tuple[Option, ...] = ()

    @property
    def touched(self) -> frozenset[str]:
        """The known memories a decision of this plan may change."""
        target = self.rule[1]
        ids = {option.memory.memory_id for option in self.band}
        return frozenset(ids | ({target.memory.memory_id} if target else set()))


def _plan(
    memory_type: MemoryType,
    new: NewMemory,
    known: Iterable[KnownMemory],
    thresholds: Thresholds,
    embedding_model: str,
) -> _Plan:
    ranked = options_for(memory_type, new, known, embedding_model=embedding_model)
    worded = _by_wording(memory_type, new, ranked)
    if worded is not None:
        return _Plan(worded)
    if ranked and ranked[0].similarity >= thresholds.reinforce:
        return _Plan(("REINFORCE", ranked[0], "near-duplicate"))
    band = [o for o in ranked if o.similarity >= thresholds.ask][: thresholds.max_options]
    if band:
        return _Plan(("ADD", None, "asked"), tuple(band))
    return _Plan(("ADD", None, "nothing similar about this subject"))


def _by_wording(
    memory_type: MemoryType, new: NewMemory, ranked: Sequence[Option]
) -> tuple[Action, Option, str] | None:
    """A decision by wording alone (`handlers.restatement`), whatever the similarity: REINFORCE
    the most similar candidate the new memory restates, else UPDATE the most similar one it
    extends. Taxonomic terms are left to the other rules (their REINFORCE merges aliases)."""
    if memory_type == "taxonomic":
        return None
    text = new.content.text
    for option in ranked:
        if restates(text, option.memory.content.text):
            return "REINFORCE", option, "its words open a known memory"
    for option in ranked:
        if extends(text, option.memory.content.text):
            return "UPDATE", option, "it opens with a known memory's words and says more"
    return None


def _restating(
    memory_type: MemoryType,
    new: NewMemory,
    source: Source,
    scope: Mapping[str, KnownMemory],
) -> tuple[Action, Option, str] | None:
    """A REINFORCE when an earlier memory of the same source already has the id `new` would be
    ADDed under (it says the same about the same subject): never a colliding ADD."""
    same = scope.get(new_memory_id(memory_type, source.source_id, new.content))
    if same is not None:
        return "REINFORCE", Option(same, 1.0), "repeated in the same source"
    return None


def in_scope(memory: KnownMemory, source: Source) -> bool:
    """Whether `memory` belongs to the scope of `source`: the same user and the same agent."""
    return memory.agent_id == source.agent_id and memory.user_id in (None, source.user_id)


def _settled(band: Sequence[Option], answer: Answer | None) -> tuple[Action, Option | None, str]:
    """The decision for an ambiguous memory: the LLM's, if it names one of the options shown."""
    if answer is None:
        return "ADD", None, "the LLM gave no usable decision"
    if answer.action == "ADD":
        return "ADD", None, answer.reason or "the LLM judged it a different memory"
    chosen = next((o for o in band if o.memory.memory_id == answer.target), None)
    if chosen is None:
        return "ADD", None, f"the LLM named {answer.target!r}, which it was not shown"
    return answer.action, chosen, answer.reason or f"the LLM chose {answer.action}"


def _event(
    memory_type: MemoryType,
    action: Action,
    new: NewMemory,
    target: KnownMemory | None,
    source: Source,
    reason: str,
    provenance: Provenance,
) -> MemoryEvent:
    """The memory event of one decision; every id derives from the inputs."""
    common: dict[str, Any] = {
        "occurred_at": source.occurred_at,
        "memory_type": memory_type,
        "user_id": source.user_id,
        "agent_id": source.agent_id,
        "evidence": source.evidence,
        "provenance": provenance,
    }
    if target is None:
        memory_id = new_memory_id(memory_type, source.source_id, new.content)
        return MemoryAdded(
            event_id=derived_id("added", memory_id),
            memory_id=memory_id,
            content=new.content,
            embedding=new.embedding,
            **common,
        )
    if action == "UPDATE":
        version = target.version + 1
        return MemoryUpdated(
            event_id=derived_id("updated", target.memory_id, version),
            memory_id=target.memory_id,
            version=version,
            supersedes_version=target.version,
            content=new.content,
            embedding=new.embedding,
            reason=reason[:1_000],
            **common,
        )
    return MemoryReinforced(
        event_id=derived_id(
            "reinforced", target.memory_id, target.version, source.source_id, new.content.text
        ),
        memory_id=target.memory_id,
        version=target.version,
        merged_attributes=merged_attributes(memory_type, target.content, new.content),
        reason=reason[:1_000],
        **common,
    )


def new_memory_id(memory_type: MemoryType, source_id: str, content: MemoryContent) -> str:
    """The id of a memory first learned from `source_id`: from its subject and text, never its
    position in an LLM answer (which a re-run LLM does not repeat)."""
    return derived_id("memory", memory_type, source_id, subject_key(content.subject), content.text)
