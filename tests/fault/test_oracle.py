"""The fault harness's pure parts: a seeded workload, malformed records, scripted answers the
extractor keeps, and an oracle that passes a faithful end state and names what is lost or
doubled in a broken one."""

from __future__ import annotations

from typing import Any

from handlers.extraction.semantic import SemanticExtractor
from tests import factories as f
from tests.support.fault import malformed as bad
from tests.support.fault.llm import GARBAGE, WorkloadLLM
from tests.support.fault.oracle import Observed, judge
from tests.support.fault.workload import Workload, expected_memories, generate

TOPIC = "t.memstream.turns"


def workload() -> Workload:
    return generate(11, users=8, sessions_per_user=3, garbled_sessions=1)


def test_the_same_seed_gives_the_same_workload_with_adds_updates_and_reinforcements() -> None:
    assert workload() == workload()
    expected = expected_memories(workload())
    assert any(len(m.versions) >= 2 for m in expected)
    assert any(m.reinforcements > 0 for m in expected)
    assert any(len(m.versions) == 1 and m.reinforcements == 0 for m in expected)


def test_every_malformed_record_is_distinct_and_refused_with_a_reason() -> None:
    records = bad.generate(5, 230)
    assert len({(r.key, r.value) for r in records}) == 230
    assert {r.kind for r in records} == set(bad.KINDS)
    assert all(r.reason for r in records)


def test_the_extractor_keeps_every_scripted_fact_in_order() -> None:
    load = workload()
    llm = WorkloadLLM(load)
    extractor = SemanticExtractor()
    for session in load.sessions:
        snapshot = f.snapshot(
            turns=[
                {"role": t.role, "content": t.content, "event_id": t.turn_id} for t in session.turns
            ],
            user_id=session.user_id,
            session_id=session.session_id,
        )
        answer = llm.extract({"messages": extractor.prompt(snapshot)})
        if session.garbled:
            assert answer == GARBAGE
            continue
        said = [load.statements[t.content] for t in session.turns if t.content in load.statements]
        assert [m.text for m in extractor.parse(answer, snapshot)] == said


def faithful(load: Workload, malformed: list[bad.Malformed]) -> Observed:
    """The end state a correct pipeline leaves: one snapshot per session, the expected memories."""
    snapshots: list[dict[str, Any]] = []
    for session in load.sessions:
        failure = "invalid LLM output" if session.garbled else None
        snapshots.append(
            {
                "_id": f"snap-{session.user_id}-{session.session_id}",
                "user_id": session.user_id,
                "session_id": session.session_id,
                "turn_ids": [t.turn_id for t in session.turns],
                "extractions": {"semantic": {"failure": failure}},
            }
        )
    turns = [{"_id": turn.turn_id, "snapshot_id": "x"} for _, turn in load.turns]
    memories: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for n, memory in enumerate(expected_memories(load)):
        for version, text in enumerate(memory.versions, start=1):
            last = version == len(memory.versions)
            memories.append(
                {
                    "memory_id": f"m{n}",
                    "user_id": memory.user_id,
                    "version": version,
                    "text": text,
                    "status": "current" if last else "superseded",
                    "reinforcement_count": memory.reinforcements if last else 0,
                }
            )
        events += [{"user_id": memory.user_id}] * (len(memory.versions) + memory.reinforcements)
    letters = [
        {"_id": r.dead_letter_id(TOPIC), "stage": "window", "reason": r.reason} for r in malformed
    ]
    letters += [
        {
            "_id": f"dl-{s['_id']}",
            "stage": "extract-semantic",
            "payload": f'{{"event_id": "{s["_id"]}"}}',
        }
        for s in snapshots
        if s["extractions"]["semantic"]["failure"]
    ]
    return Observed(snapshots, turns, memories, events, letters)


def test_the_oracle_accepts_a_faithful_end_state() -> None:
    load, malformed = workload(), bad.generate(5, 50)
    verdict = judge(load, malformed, faithful(load, malformed), turns_topic=TOPIC)
    assert verdict.ok, verdict.summary()


def test_the_oracle_names_a_lost_turn_a_doubled_memory_and_a_lost_dead_letter() -> None:
    load, malformed = workload(), bad.generate(5, 50)
    observed = faithful(load, malformed)
    observed.snapshots[0]["turn_ids"].pop()
    reinforced = next(m for m in observed.memories if m["status"] == "current")
    reinforced["reinforcement_count"] += 1
    observed.dead_letters.pop(0)
    verdict = judge(load, malformed, observed, turns_topic=TOPIC)
    assert any("is in no snapshot" in item for item in verdict.lost)
    assert any("reinforced" in item for item in verdict.duplicated)
    assert any("was not dead-lettered" in item for item in verdict.lost)
