"""The log determines the state: a rebuild from the turns topic alone, on fresh topics and a fresh
database, with workers whose clock runs a day ahead, gives the same read model, with every
promotion trigger (count, token budget, idle, flush) in the workload."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.pipeline import PipelineHarness, copy_turns, eventually

pytestmark = pytest.mark.integration

FACTS = {
    "Stripe": {
        "facts": [
            {
                "subject": "the user",
                "statement": "The user works at Stripe.",
                "owner": "user",
                "category": "work",
                "profile_field": "employer",
            }
        ]
    },
    "Lisbon": {
        "facts": [
            {
                "subject": "the user",
                "statement": "The user lives in Lisbon.",
                "owner": "user",
                "category": "basic_info",
                "profile_field": "location",
            }
        ]
    },
}
COMPARED = ("snapshots", "memories", "memory_events", "turns", "profiles")
DAY = str(24 * 3600)
TOKEN_BUDGET = {"MEMSTREAM_WINDOW_MAX_TOKENS": "50"}
LONG_TURN = "c1 " + "a longer turn of ordinary words " * 4
"""37 estimated tokens (`handlers.snapshot_size`): two of them pass the budget of 50."""
TURNS = 13


def script(pipeline: PipelineHarness) -> None:
    for word, answer in FACTS.items():
        pipeline.llm.on(word, answer, scope="last_user")


def mixed_workload(pipeline: PipelineHarness) -> int:
    """Count, token, idle and flush promotions for three users; returns how many snapshots it
    makes."""
    say = pipeline.record
    say("ann", "a1", [{"role": "user", "content": f"a1 turn {i}"} for i in range(3)])
    say("ann", "a1", [{"role": "user", "name": "Ann", "content": "I work at Stripe."}])  # count
    say("ann", "a2", [{"role": "user", "content": "I live in Lisbon."}])  # left to go idle
    say("bob", "b1", [{"role": "user", "content": f"b1 turn {i}"} for i in range(5)])  # count, 1
    say("ann", "a1", [{"role": "assistant", "content": "Noted!"}])
    pipeline.flush("ann", "a1")  # flush
    pipeline.flush("bob", "b1")  # flush
    say("cy", "c1", [{"role": "user", "content": LONG_TURN} for _ in range(2)])  # tokens
    pipeline.flush("cy", "c1")  # flush
    return 7


def read_model(pipeline: PipelineHarness) -> dict[str, list[dict[str, Any]]]:
    return {name: list(pipeline.db[name].find().sort("_id", 1)) for name in COMPARED}


def settled(pipeline: PipelineHarness, snapshots: int) -> dict[str, list[dict[str, Any]]]:
    """The read model once every snapshot is promoted, extracted and projected."""

    def done(model: dict[str, list[dict[str, Any]]]) -> bool:
        extracted = [s for s in model["snapshots"] if "semantic" in s.get("extractions", {})]
        whole = [s for s in extracted if "turn_ids" in s]
        linked = all(turn.get("snapshot_id") for turn in model["turns"])
        # A result's claim is written before its decisions are expanded (projections.extractions).
        decided = {
            d for s in extracted for r in s["extractions"].values() for d in r["decision_ids"]
        }
        expanded = decided <= {event["_id"] for event in model["memory_events"]}
        # `profiles` is its own bulk write, which may land after `memory_events`'.
        profiled = {
            (m["user_id"], m["attributes"]["profile_field"])
            for m in model["memories"]
            if m["attributes"].get("profile_field")
        } <= {(p["_id"], field) for p in model["profiles"] for field in p["fields"]}
        return (
            len(whole) == snapshots
            and len(model["turns"]) == TURNS
            and linked
            and expanded
            and profiled
        )

    return eventually(
        lambda: read_model(pipeline), done, timeout=180, what=f"{snapshots} extracted snapshots"
    )


def test_a_rebuild_from_the_turns_topic_with_another_clock_gives_the_same_read_model(
    pipeline_factory: Any,
) -> None:
    first: PipelineHarness = pipeline_factory(**TOKEN_BUDGET)
    script(first)
    expected = mixed_workload(first)
    live = settled(first, expected)
    reasons = sorted(s["reason"] for s in live["snapshots"])
    assert reasons == ["count", "count", "flush", "flush", "flush", "idle", "tokens"]
    assert len(live["memories"]) == 2

    rebuilt: PipelineHarness = pipeline_factory(
        started=False, MEMSTREAM_CLOCK_OFFSET_SECONDS=DAY, **TOKEN_BUDGET
    )
    script(rebuilt)
    copied = copy_turns(first, rebuilt)
    assert copied >= TURNS + 3  # the turns, the flushes and the live run's idle command(s)
    rebuilt.start()
    replayed = settled(rebuilt, expected)

    for name in COMPARED:
        assert replayed[name] == live[name], f"{name} differ after the rebuild"
    assert rebuilt.db["dead_letters"].count_documents({}) == 0
