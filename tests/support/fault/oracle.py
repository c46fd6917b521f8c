"""The oracle: what the read model and the log must hold after a fault run, whatever the faults.

`judge(workload, malformed, observed)` is a pure function of the generated input and what the
run observed. It checks the invariants that hold whatever the window boundaries and the order
in which sessions reached the extractors (docs/architecture.md, "Fault injection"):

* every turn of the workload is in exactly one snapshot, and nothing else is;
* every snapshot was extracted, by exactly one result (one content per result id in the log);
  the snapshots of garbled sessions failed with a dead letter, no other one did;
* every expected memory exists exactly once, with its versions' texts in order, one current
  version and the expected reinforcement count; no other memory exists; the memory events
  are exactly the ADDs, UPDATEs and REINFORCEs that implies;
* every malformed record is dead-lettered once, by the window, with the validation's reason;
  nothing else is dead-lettered (an outage never becomes a dead letter).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import orjson

from tests.support.fault.malformed import Malformed
from tests.support.fault.workload import Workload, expected_memories

Document = dict[str, Any]


@dataclass
class Observed:
    """What a run left behind: read-model documents and the result records in the log."""

    snapshots: list[Document]
    turns: list[Document]
    memories: list[Document]
    memory_events: list[Document]
    dead_letters: list[Document]
    results: list[tuple[str, bytes]] = field(default_factory=list)
    """(event id, value) of every extraction result record on the memories topic."""


@dataclass
class Verdict:
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.wrong)

    def summary(self, limit: int = 20) -> str:
        lines = [
            f"{len(self.lost)} lost, {len(self.duplicated)} duplicated, {len(self.wrong)} wrong"
        ]
        for name in ("lost", "duplicated", "wrong"):
            lines += [f"  {name}: {item}" for item in getattr(self, name)[:limit]]
        return "\n".join(lines)


def judge(
    workload: Workload,
    malformed: list[Malformed],
    observed: Observed,
    *,
    turns_topic: str,
    memory_type: str = "semantic",
) -> Verdict:
    verdict = Verdict()
    users = set(workload.users)
    snapshots = [s for s in observed.snapshots if s.get("user_id") in users]
    strangers = {
        str(d.get("user_id"))
        for d in [*observed.snapshots, *observed.memories]
        if d.get("user_id") not in users
    }
    verdict.wrong += [f"snapshots or memories of {user}, not in the workload" for user in strangers]
    _judge_turns(workload, snapshots, observed.turns, verdict)
    garbled = _judge_extractions(workload, snapshots, observed.results, verdict, memory_type)
    _judge_memories(workload, observed, verdict)
    _judge_dead_letters(
        malformed, garbled, observed.dead_letters, turns_topic, verdict, f"extract-{memory_type}"
    )
    return verdict


def _judge_turns(
    workload: Workload, snapshots: list[Document], turns: list[Document], verdict: Verdict
) -> None:
    expected = {turn.turn_id: session for session, turn in workload.turns}
    held: Counter[str] = Counter()
    for snapshot in snapshots:
        ids = snapshot.get("turn_ids") or []
        held.update(ids)
        sessions = {(expected[i].user_id, expected[i].session_id) for i in ids if i in expected}
        if sessions != {(snapshot["user_id"], snapshot["session_id"])}:
            verdict.wrong.append(f"snapshot {snapshot['_id']} holds turns of {sorted(sessions)}")
    for turn_id in expected:
        if held[turn_id] == 0:
            verdict.lost.append(f"turn {turn_id} is in no snapshot")
        elif held[turn_id] > 1:
            verdict.duplicated.append(f"turn {turn_id} is in {held[turn_id]} snapshots")
    verdict.wrong += [
        f"turn {i} in a snapshot is not in the workload" for i in held if i not in expected
    ]
    linked = {t["_id"]: t.get("snapshot_id") for t in turns}
    for turn_id in expected:
        if not linked.get(turn_id):
            verdict.lost.append(f"turn {turn_id} is not in the turns collection with its snapshot")


def _judge_extractions(
    workload: Workload,
    snapshots: list[Document],
    results: list[tuple[str, bytes]],
    verdict: Verdict,
    memory_type: str,
) -> set[str]:
    """Checks every snapshot's extraction; returns the ids of the garbled sessions' snapshots."""
    garbled_sessions = {(s.user_id, s.session_id) for s in workload.sessions if s.garbled}
    garbled: set[str] = set()
    for snapshot in snapshots:
        extraction = (snapshot.get("extractions") or {}).get(memory_type)
        if extraction is None:
            verdict.lost.append(f"snapshot {snapshot['_id']} was never extracted")
            continue
        if (snapshot["user_id"], snapshot["session_id"]) in garbled_sessions:
            garbled.add(snapshot["_id"])
            if not extraction.get("failure"):
                verdict.wrong.append(f"garbled snapshot {snapshot['_id']} did not fail")
        elif extraction.get("failure"):
            verdict.lost.append(f"snapshot {snapshot['_id']} failed: {extraction['failure']}")
    contents: defaultdict[str, set[bytes]] = defaultdict(set)
    for event_id, value in results:
        contents[event_id].add(_without_volatile(value))
    for event_id, values in contents.items():
        if len(values) > 1:
            verdict.duplicated.append(f"{len(values)} different results under {event_id}")
    return garbled


def _without_volatile(value: bytes) -> bytes:
    """A result record as compared: everything (its decisions' ids and contents, usage …)."""
    return orjson.dumps(orjson.loads(value), option=orjson.OPT_SORT_KEYS)


def _judge_memories(workload: Workload, observed: Observed, verdict: Verdict) -> None:
    users = set(workload.users)
    versions: defaultdict[str, list[Document]] = defaultdict(list)
    for document in observed.memories:
        if document.get("user_id") in users:
            versions[document["memory_id"]].append(document)
    found: defaultdict[tuple[str, tuple[str, ...]], list[tuple[str, int]]] = defaultdict(list)
    for memory_id, docs in versions.items():
        docs.sort(key=lambda d: int(d["version"]))
        numbers = [int(d["version"]) for d in docs]
        if numbers != list(range(1, len(docs) + 1)):
            verdict.wrong.append(f"memory {memory_id} has versions {numbers}")
        current = [d for d in docs if d.get("status") == "current"]
        if current != docs[-1:]:
            verdict.wrong.append(f"memory {memory_id}: {len(current)} current versions")
        texts = tuple(str(d["text"]) for d in docs)
        found[(docs[0]["user_id"], texts)].append((memory_id, int(docs[-1]["reinforcement_count"])))
    events_expected: Counter[str] = Counter()
    for memory in expected_memories(workload):
        events_expected[memory.user_id] += len(memory.versions) + memory.reinforcements
        matches = found.pop((memory.user_id, memory.versions), [])
        name = f"{memory.user_id}: {' -> '.join(memory.versions)}"
        if not matches:
            verdict.lost.append(f"memory {name} does not exist")
            continue
        if len(matches) > 1:
            verdict.duplicated.append(f"memory {name} exists {len(matches)} times")
        count = matches[0][1]
        if count > memory.reinforcements:
            verdict.duplicated.append(
                f"memory {name} reinforced {count}x, not {memory.reinforcements}x"
            )
        elif count < memory.reinforcements:
            verdict.lost.append(f"memory {name} reinforced {count}x, not {memory.reinforcements}x")
    for (user, texts), matches in found.items():
        what = "duplicated" if _is_a_known_text(workload, texts) else "wrong"
        getattr(verdict, what).append(
            f"unexpected memory {user}: {' -> '.join(texts)} ({len(matches)}x)"
        )
    events = Counter(e["user_id"] for e in observed.memory_events if e.get("user_id") in users)
    for user in users:
        if events[user] > events_expected[user]:
            verdict.duplicated.append(
                f"{user}: {events[user]} memory events, not {events_expected[user]}"
            )
        elif events[user] < events_expected[user]:
            verdict.lost.append(
                f"{user}: {events[user]} memory events, not {events_expected[user]}"
            )


def _is_a_known_text(workload: Workload, texts: tuple[str, ...]) -> bool:
    return any(text in workload.statements.values() for text in texts)


def _judge_dead_letters(
    malformed: list[Malformed],
    garbled: set[str],
    dead_letters: list[Document],
    turns_topic: str,
    verdict: Verdict,
    stage: str,
) -> None:
    by_id = {d["_id"]: d for d in dead_letters}
    explained: set[str] = set()
    for record in malformed:
        letter_id = record.dead_letter_id(turns_topic)
        letter = by_id.get(letter_id)
        explained.add(letter_id)
        if letter is None:
            verdict.lost.append(f"malformed record ({record.kind}) was not dead-lettered")
        elif (letter.get("stage"), letter.get("reason")) != ("window", record.reason[:4_000]):
            verdict.wrong.append(
                f"malformed record ({record.kind}) dead-lettered by {letter.get('stage')} "
                f"with {letter.get('reason')!r}, not {record.reason!r}"
            )
    failed: Counter[str] = Counter()
    for letter in dead_letters:
        if letter["_id"] in explained:
            continue
        snapshot_id = _snapshot_of(letter)
        if letter.get("stage") == stage and snapshot_id in garbled:
            failed[snapshot_id] += 1
            continue
        verdict.wrong.append(
            f"unexpected dead letter by {letter.get('stage')}: {str(letter.get('reason'))[:200]}"
        )
    for snapshot_id in garbled:
        if failed[snapshot_id] == 0:
            verdict.lost.append(f"garbled snapshot {snapshot_id} has no dead letter")
        elif failed[snapshot_id] > 1:
            verdict.duplicated.append(
                f"garbled snapshot {snapshot_id}: {failed[snapshot_id]} dead letters"
            )


def _snapshot_of(letter: Document) -> str | None:
    try:
        payload = orjson.loads(letter.get("payload") or b"{}")
    except orjson.JSONDecodeError:
        return None
    return payload.get("event_id") if isinstance(payload, dict) else None
