"""The projection benchmark's workload and figures (pure: no broker, no database)."""

from __future__ import annotations

from bench.projection_workload import DIMENSIONS, generate
from bench.suites.projection import expected_counts, figures_for, rate, records
from events.codec import decode
from events.memories import MEMORY_TYPES


def test_the_workload_is_the_same_for_the_same_seed() -> None:
    first = generate(3, users=3, snapshots=3)
    second = generate(3, users=3, snapshots=3)
    assert [e.event_id for e in first.events] == [e.event_id for e in second.events]
    assert first.results == second.results


def test_every_snapshot_has_its_turns_and_one_result_per_memory_type() -> None:
    workload = generate(5, users=4, sessions=2, snapshots=3)
    turn_ids = {turn.event_id for turn in workload.turns}
    assert len(workload.snapshots) == 4 * 2 * 3
    for snapshot in workload.snapshots:
        assert set(snapshot.turn_ids) <= turn_ids
        results = [r for r in workload.results if r.snapshot_id == snapshot.event_id]
        assert sorted(r.memory_type for r in results) == sorted(MEMORY_TYPES)
    assert len({e.event_id for e in workload.events}) == len(workload.events)


def test_the_reconciler_adds_reinforces_and_updates_with_full_size_vectors() -> None:
    workload = generate(11, users=8, snapshots=3)
    actions = workload.actions()
    assert set(actions) == {"MemoryAdded", "MemoryReinforced", "MemoryUpdated"}
    assert actions["MemoryAdded"] > actions["MemoryUpdated"] + actions["MemoryReinforced"]
    added = next(d for r in workload.results for d in r.decisions if d.event_type == "MemoryAdded")
    assert len(added.embedding) == DIMENSIONS  # type: ignore[union-attr]
    assert any(not r.decisions for r in workload.results)  # a type with nothing to extract


def test_expected_counts_follow_the_decisions() -> None:
    workload = generate(11, users=4, snapshots=3)
    actions = workload.actions()
    expected = expected_counts(workload)
    assert expected["turns"] == len(workload.turns)
    assert expected["memory_events"] == sum(actions.values())
    assert expected["memories"] == actions["MemoryAdded"] + actions.get("MemoryUpdated", 0)
    assert expected["extractions.semantic"] == len(workload.snapshots)


def test_records_are_keyed_like_the_stages_and_decode_back() -> None:
    workload = generate(2, users=2, snapshots=2)
    log = records(workload)
    assert [len(log[k]) for k in ("turns", "snapshots", "memories")] == [
        len(workload.turns),
        len(workload.snapshots),
        len(workload.results),
    ]
    key, value = log["memories"][0]
    assert key == workload.results[0].user_id.encode()
    assert decode(value) == workload.results[0]
    first = workload.turns[0]
    assert log["turns"][0][0] == f"{first.user_id}|{first.session_id}".encode()


def test_rate_of_no_time_is_zero() -> None:
    assert rate(100, 0.0) == 0.0
    assert rate(100, 4.0) == 25.0


def test_figures_take_medians_over_rounds_and_aim_at_live_and_replay() -> None:
    def round_(live: float, replay: float, read: float, bulk: float) -> dict[str, object]:
        return {
            "live": {"seconds": live},
            "replay": {"seconds": replay, "project_seconds": replay - read},
            "baseline": {"seconds": bulk},
        }

    raw = {
        "rounds": [round_(10, 5, 1, 4), round_(20, 5, 1, 4), round_(10, 6, 2, 4)],
        "documents": {"turns": 7, "memories": 3},
    }
    live, replay, only = figures_for("tansu", 100, raw)
    assert (live.ours, live.baseline, live.ratio, live.met) == (10.0, 25.0, 0.4, False)
    assert replay.ours == 20.0 and replay.ratio == 0.8 and replay.met
    assert only.ours == 25.0
    assert "100 events → 10 documents" in live.note
