"""A random log for the projections, built from the real event models (seeded: reproducible).

Two users, three sessions each, two turns-topic partitions. The log mixes what the stages
write — turns (named and not, some at the same time), snapshots of a session's next turns,
one result per snapshot and memory type with ADD / UPDATE / REINFORCE decisions (profile facts
among them), failed results and their redrives, re-extractions (the same result id, other
decisions: the first result wins), direct saves, memory events on their own, dead letters and
their redrives, every kind of forget record — with what goes wrong: redeliveries of any earlier
record, a turn id reused for other content, a snapshot id naming other turns, a memory event id
or a memory version reused for other content inside a result (a collision half-way through).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from events.codec import AnyEvent
from events.consolidations import ClusterOutcome, MemoriesConsolidated, MemoryRetired
from events.dead_letters import DeadLetterRedriven, InputDeadLettered
from events.forgetting import (
    MemoriesForgotten,
    MemoryExpired,
    MemoryForgotten,
    SessionForgotten,
    SessionsForgotten,
    UserForgotten,
)
from events.memories import (
    MEMORY_TYPES,
    Evidence,
    LLMUsage,
    MemoryAdded,
    MemoryContent,
    MemoryReinforced,
    MemoryType,
    MemoryUpdated,
    Provenance,
)
from events.rollbacks import MemoryRolledBack
from events.saves import MemorySaved
from events.snapshots import SnapshotExtracted, SnapshotPromoted, SnapshotTurn, snapshot_id
from events.turns import TurnRecorded

Logged = tuple[AnyEvent, int | None]
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
USERS = ("tim", "ann")
SESSIONS = ("s1", "s2", "s3")
PARTITIONS = 2
PROVENANCE = Provenance(embedding_model="scripted-embedding", embedding_dimensions=2)
_SAID = (
    "I live in Lisbon.",
    "I have a dog.",
    "I work at Stripe.",
    "我住在里斯本。",
    "Tea, please.",
)


@dataclass
class _Memory:
    memory_id: str
    user_id: str
    memory_type: MemoryType
    version: int = 1


@dataclass
class RandomLog:
    """Generates the log; `log` holds it in order."""

    rng: random.Random
    log: list[Logged] = field(default_factory=list)
    counter: int = 0
    pending: dict[tuple[str, str], list[TurnRecorded]] = field(default_factory=dict)
    snapshots: list[SnapshotPromoted] = field(default_factory=list)
    results: dict[tuple[str, str], SnapshotExtracted] = field(default_factory=dict)
    memories: list[_Memory] = field(default_factory=list)
    decisions: list[MemoryAdded] = field(default_factory=list)
    dead_letters: list[str] = field(default_factory=list)
    turns: list[TurnRecorded] = field(default_factory=list)

    def generate(self, records: int) -> list[Logged]:
        steps = (
            (self.turn, 30),
            (self.snapshot, 12),
            (self.result, 18),
            (self.save, 3),
            (self.rollback, 2),
            (self.consolidation, 2),
            (self.memory_event, 3),
            (self.dead_letter, 3),
            (self.forget, 4),
            (self.redeliver, 8),
            (self.collide, 4),
        )
        while len(self.log) < records:
            step = self.rng.choices([s for s, _ in steps], [w for _, w in steps])[0]
            step()
        return self.log

    # -- helpers ---------------------------------------------------------------------------------

    def _id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    def _at(self) -> datetime:
        """A time that often repeats (ties between observations)."""
        return T0 + timedelta(minutes=self.rng.randrange(40), microseconds=self.rng.randrange(3))

    def _partition(self, user: str, session: str) -> int:
        return (USERS.index(user) + SESSIONS.index(session)) % PARTITIONS

    def _emit(self, event: AnyEvent, partition: int | None = 0) -> None:
        self.log.append((event, partition))

    def _evidence(self, snapshot: SnapshotPromoted | None) -> Evidence:
        if snapshot is None:
            return Evidence(source="sdk", observed_at=self._at())
        return Evidence(
            source="extraction",
            snapshot_id=snapshot.event_id,
            session_id=snapshot.session_id,
            observed_at=self._at(),
        )

    def _content(self) -> MemoryContent:
        attributes: dict[str, Any] = {}
        if self.rng.random() < 0.4:
            attributes["profile_field"] = self.rng.choice(("location", "employer", "name"))
        if self.rng.random() < 0.3:
            attributes["since"] = self.rng.randrange(2000, 2026)
        return MemoryContent(
            subject=self.rng.choice(("the user", "the user", "John")),
            owner="user",
            text=f"{self.rng.choice(_SAID)} ({self.rng.randrange(6)})",
            category="basic_info",
            attributes=attributes,
        )

    def _decisions(
        self, user: str, memory_type: MemoryType, source: SnapshotPromoted | None
    ) -> list[Any]:
        decisions: list[Any] = []
        for _ in range(self.rng.randrange(4)):
            mine = [m for m in self.memories if m.user_id == user and m.memory_type == memory_type]
            kind = self.rng.choice(("add", "add", "update", "reinforce")) if mine else "add"
            common = {
                "event_id": self._id("e"),
                "occurred_at": self._at(),
                "memory_type": memory_type,
                "user_id": user,
                "evidence": self._evidence(source),
                "provenance": PROVENANCE,
            }
            if kind == "add":
                memory = _Memory(self._id("m"), user, memory_type)
                self.memories.append(memory)
                added = MemoryAdded(
                    memory_id=memory.memory_id,
                    content=self._content(),
                    embedding=(self.rng.random(), self.rng.random()),
                    **common,
                )
                self.decisions.append(added)
                decisions.append(added)
            elif kind == "update":
                memory = self.rng.choice(mine)
                memory.version += 1
                decisions.append(
                    MemoryUpdated(
                        memory_id=memory.memory_id,
                        version=memory.version,
                        supersedes_version=memory.version - 1,
                        content=self._content(),
                        embedding=(self.rng.random(), 0.5),
                        reason="it changed",
                        **common,
                    )
                )
            else:
                memory = self.rng.choice(mine)
                merged = (
                    {"since": self.rng.randrange(2000, 2026)} if self.rng.random() < 0.5 else {}
                )
                decisions.append(
                    MemoryReinforced(
                        memory_id=memory.memory_id,
                        version=memory.version,
                        merged_attributes=merged,
                        **common,
                    )
                )
        return decisions

    def _extracted(
        self,
        snapshot: SnapshotPromoted,
        memory_type: MemoryType,
        decisions: list[Any],
        *,
        failure: str | None = None,
        redrive_id: str | None = None,
    ) -> SnapshotExtracted:
        suffix = f"-{redrive_id}" if redrive_id else ""
        return SnapshotExtracted(
            event_id=f"x-{snapshot.event_id}-{memory_type}{suffix}",
            occurred_at=snapshot.occurred_at,
            snapshot_id=snapshot.event_id,
            user_id=snapshot.user_id,
            session_id=snapshot.session_id,
            memory_type=memory_type,
            decisions=tuple(decisions),
            attempts=self.rng.randrange(1, 3),
            failure=failure,
            usage=LLMUsage(calls=1, prompt_tokens=self.rng.randrange(100)),
            redrive_id=redrive_id,
        )

    # -- steps -----------------------------------------------------------------------------------

    def turn(self) -> None:
        user, session = self.rng.choice(USERS), self.rng.choice(SESSIONS)
        role = self.rng.choice(("user", "user", "assistant"))
        name = None
        if role == "user" and self.rng.random() < 0.5:
            name = self.rng.choice(("Tim", "Tim", "Timothy"))
        at = self._at()
        turn = TurnRecorded(
            event_id=self._id("t"),
            occurred_at=at,
            recorded_at=at,
            user_id=user,
            session_id=session,
            role=role,
            name=name,
            content=self.rng.choice(_SAID),
        )
        self.pending.setdefault((user, session), []).append(turn)
        self.turns.append(turn)
        self._emit(turn, self._partition(user, session))

    def snapshot(self) -> None:
        ready = [key for key, turns in self.pending.items() if turns]
        if not ready:
            return
        user, session = self.rng.choice(ready)
        turns = self.pending[(user, session)]
        taken, self.pending[(user, session)] = turns[: self.rng.randint(1, 4)], turns[4:]
        snapshot = SnapshotPromoted(
            event_id=snapshot_id(user, session, [t.event_id for t in taken]),
            occurred_at=max(t.occurred_at for t in taken),
            user_id=user,
            session_id=session,
            seq=len(self.snapshots),
            reason="count",
            turns=tuple(
                SnapshotTurn(
                    turn_id=t.event_id,
                    role=t.role,
                    name=t.name,
                    content=t.content,
                    occurred_at=t.occurred_at,
                )
                for t in taken
            ),
        )
        self.snapshots.append(snapshot)
        self._emit(snapshot, self.rng.randrange(PARTITIONS))

    def result(self) -> None:
        if not self.snapshots:
            return
        snapshot = self.rng.choice(self.snapshots)
        memory_type = self.rng.choice(MEMORY_TYPES)
        first = self.results.get((snapshot.event_id, memory_type))
        if first is not None and first.failure and self.rng.random() < 0.6:  # a redrive
            redrive = self._id("redrive")
            decisions = self._decisions(snapshot.user_id, memory_type, snapshot)
            self._emit(self._extracted(snapshot, memory_type, decisions, redrive_id=redrive))
            return
        if self.rng.random() < 0.2:
            result = self._extracted(snapshot, memory_type, [], failure="the LLM answered junk")
        else:
            decisions = self._decisions(snapshot.user_id, memory_type, snapshot)
            result = self._extracted(snapshot, memory_type, decisions)  # first, or a re-extraction
        self.results.setdefault((snapshot.event_id, memory_type), result)
        self._emit(result)

    def save(self) -> None:
        user, memory_type = self.rng.choice(USERS), self.rng.choice(MEMORY_TYPES)
        save_id = self._id("save")
        self._emit(
            MemorySaved(
                event_id=f"saved-{save_id}",
                occurred_at=self._at(),
                save_id=save_id,
                user_id=user,
                memory_type=memory_type,
                decisions=tuple(self._decisions(user, memory_type, None)),
            )
        )

    def rollback(self) -> None:
        """A rollback of a memory with an earlier version (a new version), or a refusal."""
        earlier = [m for m in self.memories if m.version > 1]
        if not earlier:
            return
        memory = self.rng.choice(earlier)
        rollback_id = self._id("rollback")
        fields: dict[str, Any] = {
            "event_id": f"rolled-back-{rollback_id}",
            "occurred_at": self._at(),
            "rollback_id": rollback_id,
            "user_id": memory.user_id,
            "memory_type": memory.memory_type,
            "memory_id": memory.memory_id,
            "to_version": self.rng.randrange(1, memory.version),
            "requested_by": "ops:test",
            "reason": self.rng.choice(("", "wrong")),
        }
        if self.rng.random() < 0.2:
            self._emit(MemoryRolledBack(refused="not now", **fields))
            return
        memory.version += 1
        restoring = MemoryUpdated(
            event_id=self._id("e"),
            occurred_at=fields["occurred_at"],
            memory_id=memory.memory_id,
            memory_type=memory.memory_type,
            user_id=memory.user_id,
            provenance=PROVENANCE,
            version=memory.version,
            supersedes_version=memory.version - 1,
            content=self._content(),
            embedding=(self.rng.random(), 0.25),
            evidence=self._evidence(None),
            reason="rollback",
        )
        self._emit(MemoryRolledBack(decisions=(restoring,), **fields))

    def consolidation(self) -> None:
        """A consolidation run: one memory merged into another of its user and type (the
        survivor's new version, the other retired), or a run that changed nothing."""
        at = self._at()
        request_id = self._id("consolidation")
        pairs = [
            (a, b)
            for a in self.memories
            for b in self.memories
            if a is not b and (a.user_id, a.memory_type) == (b.user_id, b.memory_type)
        ]
        if not pairs or self.rng.random() < 0.2:
            user, memory_type = self.rng.choice(USERS), self.rng.choice(MEMORY_TYPES)
            self._emit(
                MemoriesConsolidated(
                    event_id=f"consolidated-{request_id}",
                    occurred_at=at,
                    consolidation_id=request_id,
                    user_id=user,
                    memory_type=memory_type,
                    requested_by="ops:test",
                    max_calls=0,
                    unchanged="the budget of LLM calls allowed no question",
                )
            )
            return
        survivor, other = self.rng.choice(pairs)
        survivor.version += 1
        merged = MemoryUpdated(
            event_id=self._id("e"),
            occurred_at=at,
            memory_id=survivor.memory_id,
            memory_type=survivor.memory_type,
            user_id=survivor.user_id,
            provenance=PROVENANCE,
            version=survivor.version,
            supersedes_version=survivor.version - 1,
            content=self._content(),
            embedding=(self.rng.random(), 0.5),
            evidence=self._evidence(None),
            reason="consolidation",
        )
        retired = MemoryRetired(
            event_id=self._id("retired"),
            memory_id=other.memory_id,
            version=other.version,
            user_id=other.user_id,
            memory_type=other.memory_type,
            into=survivor.memory_id,
            into_version=survivor.version,
            action=self.rng.choice(("merge", "supersede")),
            occurred_at=at,
        )
        self.memories.remove(other)
        self._emit(
            MemoriesConsolidated(
                event_id=f"consolidated-{request_id}",
                occurred_at=at,
                consolidation_id=request_id,
                user_id=survivor.user_id,
                memory_type=survivor.memory_type,
                requested_by="ops:test",
                max_calls=3,
                decisions=(merged,),
                retired=(retired,),
                clusters=(
                    ClusterOutcome(
                        memory_ids=(survivor.memory_id, other.memory_id),
                        action=retired.action,
                        survivor=survivor.memory_id,
                    ),
                ),
                clusters_found=1,
                clusters_asked=1,
                usage=LLMUsage(calls=1, prompt_tokens=50, completion_tokens=9),
                prompt_version="consolidate-1",
            )
        )

    def memory_event(self) -> None:
        user, memory_type = self.rng.choice(USERS), self.rng.choice(MEMORY_TYPES)
        for decision in self._decisions(user, memory_type, None)[:1]:
            self._emit(decision)

    def dead_letter(self) -> None:
        if self.dead_letters and self.rng.random() < 0.5:
            letter = self.rng.choice(self.dead_letters)
            self._emit(
                DeadLetterRedriven(
                    event_id=self._id("redriven"),
                    occurred_at=self._at(),
                    dead_letter_id=letter,
                    stage="window",
                    target_topic="turns",
                    target_partition=0,
                )
            )
            return
        letter = self._id("dl")
        self.dead_letters.append(letter)
        self._emit(
            InputDeadLettered(
                event_id=letter,
                occurred_at=self._at(),
                stage="window",
                reason="not JSON",
                source_topic="turns",
                payload="{",
                dead_lettered_at=self._at(),
            )
        )

    def forget(self) -> None:
        user = self.rng.choice(USERS)
        session = self.rng.choice(SESSIONS)
        request = self._id("forget")
        mine = [m for m in self.memories if m.user_id == user]
        kind = self.rng.choice(("memory", "session", "user", "sessions", "memories", "expired"))
        common = {"event_id": request, "occurred_at": self._at(), "user_id": user}
        if kind == "memory" and mine:
            memory = self.rng.choice(mine)
            self._emit(
                MemoryForgotten(
                    memory_id=memory.memory_id,
                    memory_type=memory.memory_type,
                    requested_by="cli:test",
                    **common,
                )
            )
        elif kind == "session":
            self._emit(
                SessionForgotten(session_id=session, requested_by="cli:test", **common),
                self._partition(user, session),
            )
        elif kind == "user":
            partition = self.rng.choice((0, 1, None))
            self._emit(
                UserForgotten(requested_by="cli:test", turns_partition=partition, **common),
                partition or 0,
            )
        elif kind == "sessions":
            self._emit(
                SessionsForgotten(
                    request_id=request,
                    scope="session",
                    session_ids=(session,),
                    turns_partition=self._partition(user, session),
                    **common,
                )
            )
        elif kind == "memories" and mine:
            chosen = self.rng.sample(mine, k=min(len(mine), 2))
            self._emit(
                MemoriesForgotten(
                    request_id=request,
                    scope="session",
                    memory_type=chosen[0].memory_type,
                    memory_ids=tuple(m.memory_id for m in chosen),
                    session_ids=(session,) if self.rng.random() < 0.5 else (),
                    saves=self.rng.random() < 0.3,
                    **common,
                )
            )
        elif kind == "expired" and mine:
            memory = self.rng.choice(mine)
            self._emit(
                MemoryExpired(
                    memory_id=memory.memory_id,
                    memory_type=memory.memory_type,
                    expires_at=self._at(),
                    **common,
                )
            )

    def redeliver(self) -> None:
        """One earlier record again, or a run of them (as after a crash)."""
        if not self.log:
            return
        if self.rng.random() < 0.7:
            self.log.append(self.rng.choice(self.log))
            return
        start = self.rng.randrange(len(self.log))
        self.log.extend(self.log[start : start + self.rng.randint(2, 8)])

    def collide(self) -> None:
        kind = self.rng.choice(("turn", "snapshot", "event", "version", "reinforce"))
        if kind == "turn" and self.turns:
            turn = self.rng.choice(self.turns)
            reused = turn.model_copy(update={"content": "Something else entirely."})
            self._emit(reused, self._partition(turn.user_id, turn.session_id))
        elif kind == "snapshot" and len(self.snapshots) > 1:
            snapshot, forged = self.rng.sample(self.snapshots, 2)
            self._emit(snapshot.model_copy(update={"turns": forged.turns}))
        elif kind in ("event", "version", "reinforce") and self.decisions:
            self._collide_in_a_result(kind, self.rng.choice(self.decisions))

    def _collide_in_a_result(self, kind: str, reused: MemoryAdded) -> None:
        """A result whose decisions reuse `reused`'s memory version or event id for other
        content, among decisions that are fine (before and after it)."""
        free = [
            s
            for s in self.snapshots
            if s.user_id == reused.user_id and (s.event_id, reused.memory_type) not in self.results
        ]
        if not free:
            return
        snapshot = self.rng.choice(free)
        if kind == "reinforce":  # a reinforcement under an event id the log already holds
            changed: Any = MemoryReinforced(
                event_id=reused.event_id,
                occurred_at=self._at(),
                memory_id=reused.memory_id,
                memory_type=reused.memory_type,
                user_id=reused.user_id,
                version=1,
                evidence=self._evidence(snapshot),
                provenance=PROVENANCE,
            )
        else:
            event_id = reused.event_id if kind == "event" else self._id("e")
            changed = reused.model_copy(update={"content": self._content(), "event_id": event_id})
        decisions = self._decisions(reused.user_id, reused.memory_type, snapshot)
        decisions.insert(self.rng.randrange(len(decisions) + 1), changed)
        result = self._extracted(snapshot, reused.memory_type, decisions)
        self.results[(snapshot.event_id, reused.memory_type)] = result
        self._emit(result)


def random_log(seed: int, records: int) -> list[Logged]:
    """`records` log records (and a few more: a step may write several) for `seed`."""
    return RandomLog(random.Random(seed)).generate(records)
