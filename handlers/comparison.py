"""Comparing two read models built from one log by two extractors (`memstream compare`,
docs/architecture.md, "Re-extraction"): what each remembers that the other does not.

Pure: the caller reads each side's current memories, memory-event counts and extraction costs
(`Side`), and `compare` says, per user and memory type:

* **same** — current memories with the same subject and text on both sides;
* **changed** — a memory on each side learned from the same snapshot about the same subject,
  in other words (the live text, the shadow's): the extractors read the same thing differently;
* **only live** / **only shadow** — the rest of each side's current memories;
* **updates** and **reinforcements** — how often each side's reconciliation changed or
  restated a memory (its `MemoryUpdated` and `MemoryReinforced` events);
* **duplicates** — pairs of current memories of one side that say the same words about the
  same subject (case, spacing and punctuation aside): what reconciliation should have merged;
* the **cost** of each side's extraction: snapshots, LLM calls and tokens per snapshot.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Key = tuple[str, str]
"""(user id, memory type)."""


@dataclass(frozen=True)
class Remembered:
    """One current memory, as compared."""

    user_id: str
    memory_type: str
    subject: str
    text: str
    snapshot_id: str | None
    """The snapshot it was first learned from (None: saved directly)."""


@dataclass(frozen=True)
class Cost:
    """What one side's extraction of one type cost."""

    snapshots: int = 0
    failed: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def per_snapshot(self) -> dict[str, float]:
        count = max(self.snapshots, 1)
        return {
            "calls": round(self.calls / count, 2),
            "prompt_tokens": round(self.prompt_tokens / count, 1),
            "completion_tokens": round(self.completion_tokens / count, 1),
        }


@dataclass(frozen=True)
class Side:
    """One read model, as much of it as a comparison reads."""

    name: str
    memories: Sequence[Remembered]
    events: Mapping[Key, Counter[str]] = field(default_factory=dict)
    """Per (user, type): memory events by event type."""
    costs: Mapping[str, Cost] = field(default_factory=dict)
    """Per memory type."""


@dataclass(frozen=True)
class Difference:
    """How the two sides differ for one user and memory type."""

    user_id: str
    memory_type: str
    same: int
    changed: tuple[tuple[str, str], ...]
    only_live: tuple[str, ...]
    only_shadow: tuple[str, ...]
    updates: tuple[int, int]
    reinforcements: tuple[int, int]
    duplicates: tuple[int, int]

    @property
    def differs(self) -> bool:
        return bool(self.changed or self.only_live or self.only_shadow)


@dataclass(frozen=True)
class Comparison:
    live: str
    shadow: str
    differences: tuple[Difference, ...]
    costs: dict[str, dict[str, Any]]


def compare(live: Side, shadow: Side, users: Iterable[str] = ()) -> Comparison:
    """Every (user, type) either side holds memories or events of (only `users`, if given)."""
    wanted = set(users)
    mine, theirs = _by_key(live.memories), _by_key(shadow.memories)
    keys = set(mine) | set(theirs) | set(live.events) | set(shadow.events)
    keys = {key for key in keys if not wanted or key[0] in wanted}
    differences = tuple(
        _difference(key, mine.get(key, []), theirs.get(key, []), live, shadow)
        for key in sorted(keys)
    )
    types = sorted(set(live.costs) | set(shadow.costs))
    costs = {
        kind: {
            side.name: {
                "snapshots": side.costs.get(kind, Cost()).snapshots,
                **side.costs.get(kind, Cost()).per_snapshot(),
            }
            for side in (live, shadow)
        }
        for kind in types
    }
    return Comparison(live.name, shadow.name, differences, costs)


def _by_key(memories: Iterable[Remembered]) -> dict[Key, list[Remembered]]:
    grouped: dict[Key, list[Remembered]] = defaultdict(list)
    for memory in memories:
        grouped[(memory.user_id, memory.memory_type)].append(memory)
    return grouped


def _difference(
    key: Key, mine: list[Remembered], theirs: list[Remembered], live: Side, shadow: Side
) -> Difference:
    shared = {_said(m) for m in mine} & {_said(m) for m in theirs}
    left = [m for m in mine if _said(m) not in shared]
    right = [m for m in theirs if _said(m) not in shared]
    changed: list[tuple[str, str]] = []
    for memory in list(left):
        partner = next(
            (
                other
                for other in right
                if memory.snapshot_id is not None
                and other.snapshot_id == memory.snapshot_id
                and _normal(other.subject) == _normal(memory.subject)
            ),
            None,
        )
        if partner is not None:
            changed.append((memory.text, partner.text))
            left.remove(memory)
            right.remove(partner)
    counts = (live.events.get(key, Counter()), shadow.events.get(key, Counter()))
    return Difference(
        user_id=key[0],
        memory_type=key[1],
        same=len(shared),
        changed=tuple(changed),
        only_live=tuple(sorted(m.text for m in left)),
        only_shadow=tuple(sorted(m.text for m in right)),
        updates=(counts[0]["MemoryUpdated"], counts[1]["MemoryUpdated"]),
        reinforcements=(counts[0]["MemoryReinforced"], counts[1]["MemoryReinforced"]),
        duplicates=(_duplicates(mine), _duplicates(theirs)),
    )


_PUNCTUATION = re.compile(r"[^\w\s]")


def _normal(text: str) -> str:
    return " ".join(_PUNCTUATION.sub(" ", text.casefold()).split())


def _said(memory: Remembered) -> Key:
    return (_normal(memory.subject), memory.text)


def _duplicates(memories: Iterable[Remembered]) -> int:
    """Pairs of memories with the same subject and the same words."""
    counts = Counter((_normal(m.subject), _normal(m.text)) for m in memories)
    return sum(n * (n - 1) // 2 for n in counts.values())


def summary_lines(comparison: Comparison) -> list[str]:
    """The comparison as text: one block per (user, type) that differs, then the costs."""
    lines = [f"live {comparison.live} against shadow {comparison.shadow}"]
    differing = [d for d in comparison.differences if d.differs]
    for d in differing:
        lines.append(
            f"{d.user_id} / {d.memory_type}: {d.same} same, {len(d.changed)} changed, "
            f"{len(d.only_live)} only live, {len(d.only_shadow)} only shadow; updates "
            f"{d.updates[0]} / {d.updates[1]}, reinforcements {d.reinforcements[0]} / "
            f"{d.reinforcements[1]}, duplicates {d.duplicates[0]} / {d.duplicates[1]}"
        )
        lines += [f"  ~ {old}  ->  {new}" for old, new in d.changed]
        lines += [f"  - {text}" for text in d.only_live]
        lines += [f"  + {text}" for text in d.only_shadow]
    same = len(comparison.differences) - len(differing)
    lines.append(f"{same} of {len(comparison.differences)} user and type pairs alike")
    for kind, sides in comparison.costs.items():
        parts = [
            f"{name}: {cost['snapshots']} snapshots, {cost['calls']} calls, "
            f"{cost['prompt_tokens']} + {cost['completion_tokens']} tokens per snapshot"
            for name, cost in sides.items()
        ]
        lines.append(f"cost of {kind}: " + "; ".join(parts))
    return lines
