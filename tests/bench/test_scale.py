"""The scale suite's pure parts: its environment, how it reads results off the memories topic,
and how its figures turn the same run's measurements into ratios with the issue's aims."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from aiokafka import ConsumerRecord

from bench.core import Aim, Figure, SuiteResult
from bench.kafka_probe import Arrival
from bench.projection_workload import generate
from bench.scale_extraction import in_flight_limit
from bench.scale_history import Restart, growth
from bench.scale_memory_history import fresh_users
from bench.scale_stages import (
    MAX_IN_FLIGHT_VARIABLE,
    ResultSeen,
    ResultWatch,
    result_seen,
    scale_environment,
    stage_group,
    stalled,
)
from bench.stage_drain import Sample
from bench.suites.scale import extraction_figures, history_figures, issue_figures
from events.codec import encode
from memstream.config import load_settings


def test_the_environment_asks_for_the_in_flight_limit_and_partitions_settings_accept() -> None:
    env = scale_environment(
        "tansu", bootstrap="127.0.0.1:9092", mongo_uri="mongodb://127.0.0.1:1", llm_url="http://x",
        config=Path("/dev/null"), partitions=8, max_in_flight=8,
    )  # fmt: skip
    assert env[MAX_IN_FLIGHT_VARIABLE] == "8"
    assert env["MEMSTREAM_PRODUCER_MAX_BATCH_SIZE"] == "1"  # Tansu's worker environment
    settings = load_settings(environ=env)
    assert settings.kafka.partitions == 8
    assert stage_group(settings, "extract:semantic") == env["MEMSTREAM_GROUP_PREFIX"] + (
        "extract-semantic"
    )


def test_two_environments_never_share_topics_groups_or_database() -> None:
    make = dict(
        bootstrap="b", mongo_uri="m", llm_url="l", config=Path("c"), partitions=4, max_in_flight=1
    )
    first, second = scale_environment("apache", **make), scale_environment("apache", **make)  # type: ignore[arg-type]
    for name in ("MEMSTREAM_TOPIC_PREFIX", "MEMSTREAM_GROUP_PREFIX", "MONGODB_DATABASE"):
        assert first[name] != second[name]


def _arrival(value: bytes, offset: int = 0) -> Arrival:
    record = ConsumerRecord("memories", 0, offset, 0, 0, b"k", value, None, 2, len(value), [])
    return Arrival(record, float(offset))


def test_a_result_is_read_from_its_plain_fields() -> None:
    result = generate(3, users=1, snapshots=1).results[0]
    seen = result_seen(encode(result), 1.5)
    assert seen == ResultSeen(
        "SnapshotExtracted", result.user_id, result.memory_type, result.snapshot_id,
        result.usage.calls, 1.5,
    )  # fmt: skip


def test_records_that_are_not_results_are_passed_over() -> None:
    snapshot = generate(3, users=1, snapshots=1).snapshots[0]
    assert result_seen(encode(snapshot), 0.0) is None
    assert result_seen(b"not json", 0.0) is None
    assert result_seen(b"[1, 2]", 0.0) is None


def test_the_watch_is_done_when_every_user_has_a_result_of_every_type() -> None:
    workload = generate(5, users=2, snapshots=1)
    users = frozenset(r.user_id for r in workload.results)
    watch = ResultWatch(users, ("semantic", "episodic"))
    arrivals = [_arrival(encode(r), i) for i, r in enumerate(workload.results)]
    assert not watch(arrivals[:1])
    assert watch(arrivals)  # the second call reads only the arrivals it had not seen
    assert watch.found == 4 == watch.expected
    assert watch.calls == sum(
        r.usage.calls for r in workload.results if r.memory_type in watch.types
    )


def test_the_watch_counts_a_re_sent_result_once_and_ignores_other_users() -> None:
    result = generate(5, users=1, snapshots=1).results[0]
    watch = ResultWatch(frozenset({result.user_id}), (result.memory_type,), per_user=2)
    other = result.model_copy(update={"user_id": "someone-else"})
    assert not watch([_arrival(encode(result)), _arrival(encode(result), 1)])
    watch([_arrival(encode(other), 2)])
    assert watch.found == 1


def test_the_in_flight_limit_is_workers_times_the_setting() -> None:
    assert in_flight_limit(4, 8) == 32
    with pytest.raises(ValueError):
        in_flight_limit(0, 8)


def _round(users: int, workers: int, seconds: float, bare: float) -> dict[str, object]:
    return {
        "users": users,
        "extraction_workers": workers,
        "max_in_flight_setting": 8,
        "in_flight_limit": workers * 8,
        "seconds": seconds,
        "calls": {"chat": 4 * users, "embeddings": users},
        "results": 4 * users,
        "max_in_flight_seen": workers,
        "bare": {"seconds": bare},
    }


def test_extraction_ratios_are_the_bare_clients_time_over_the_pipelines() -> None:
    raw = {"one_worker": [_round(40, 4, 50.0, 5.0)], "two_workers": [_round(40, 8, 25.0, 3.0)]}
    bare, scaled = extraction_figures("tansu", raw)
    assert bare.ratio == pytest.approx(5.0 / 50.0)
    assert bare.aim == Aim(">=", 0.8) and bare.met is False
    assert scaled.ratio == pytest.approx(50.0 / 25.0)
    assert scaled.aim == Aim(">=", 1.7) and scaled.met is True


def _restart(stage: str, history: int, seconds: float, rss: float) -> Restart:
    return Restart(stage, history, 1.0, seconds, rss, rss, 10, history)


def test_history_ratios_compare_the_largest_history_with_the_smallest() -> None:
    restarts = [
        _restart(stage, history, seconds, rss)
        for stage in ("window", "extract:semantic", "projector")
        for history, seconds, rss in ((10_000, 12.0, 260.0), (1_000, 8.0, 100.0))
    ]
    figures = {f.benchmark: f for f in history_figures("apache", restarts)}
    restart = figures["restart time at 10x history, extract:semantic"]
    assert restart.ratio == pytest.approx(1.5) and restart.met is False
    assert figures["RSS at 10x history, window"].ratio == pytest.approx(2.6)
    assert restart.setting == "apache, 10,000 vs 1,000 memories"


def test_growth_needs_two_history_sizes() -> None:
    with pytest.raises(ValueError, match="need two"):
        growth([_restart("window", 100, 1.0, 1.0)], "window")


def test_fresh_users_are_spread_over_the_existing_ones_and_shift_between_measurements() -> None:
    assert fresh_users(50, 10, 0) == [0, 5, 10, 15, 20, 25, 30, 35, 40, 45]
    assert fresh_users(50, 10, 1) == [1, 6, 11, 16, 21, 26, 31, 36, 41, 46]
    assert fresh_users(5, 10, 0) == [0, 1, 2, 3, 4]


def test_the_other_suites_figures_are_taken_with_the_issues_aims() -> None:
    window = Figure("window", "tansu", "turns/s", 60.0, 3000.0, "bare loop", Aim(">=", 0.5))
    cpu = Figure("window CPU", "tansu", "CPU s", 3.0, 0.05)
    live = Figure("projection live", "tansu", "events/s", 13.0, 246.0, "bulk_write")
    replay = Figure("replay", "tansu", "events/s", 42.0, 246.0, "bulk_write", Aim(">=", 0.8))
    chosen = issue_figures("window", SuiteResult([window, cpu]))
    assert [f.benchmark for f in chosen] == ["window"]
    assert chosen[0].aim == Aim(">=", 0.5) and "window suite" in chosen[0].note
    projected = {f.benchmark: f for f in issue_figures("projection", SuiteResult([live, replay]))}
    assert projected["projection live"].aim == Aim(">=", 0.5)
    assert projected["replay"].aim == Aim(">=", 0.8)
    assert projected["projection live"].ours == 13.0


def test_growth_takes_each_sizes_median_restart() -> None:
    restarts = [
        _restart("window", 100, seconds, rss)
        for seconds, rss in ((9.0, 90.0), (7.0, 80.0), (30.0, 85.0))
    ] + [_restart("window", 1_000, 8.0, 88.0)]
    small, large = growth(restarts, "window")
    assert (small.caught_up_seconds, small.rss_mb, small.history) == (9.0, 85.0, 100)
    assert large.caught_up_seconds == 8.0


def test_the_search_suites_first_vs_warm_figures_with_an_aim_are_taken_as_they_are() -> None:
    aimed = Figure(
        "search, first search / warm search", "1,000 memories", "ms", 40.0, 20.0, "warm p50",
        Aim("<=", 3),
    )  # fmt: skip
    unaimed = dataclasses.replace(aimed, setting="100,000 memories", aim=None)
    other = Figure("search p95, in-process ranking (hybrid)", "1,000 memories", "ms", 1.0, 1.0)
    (chosen,) = issue_figures("search", SuiteResult([aimed, unaimed, other]))
    assert (chosen.ours, chosen.baseline, chosen.aim) == (40.0, 20.0, Aim("<=", 3))


def test_a_stage_has_stalled_when_its_lag_stays_the_same_above_zero_for_long_enough() -> None:
    still = [Sample(t, 5, 100) for t in (0.0, 30.0, 61.0)]
    assert stalled(still, 60.0)
    assert not stalled(still[:2], 60.0)  # not for long enough yet
    moving = [Sample(0.0, 9, 100), Sample(30.0, 5, 100), Sample(61.0, 5, 100)]
    assert not stalled(moving, 60.0)
    growing = [Sample(0.0, 5, 90), Sample(61.0, 5, 100)]  # new input arrived meanwhile
    assert not stalled(growing, 60.0)
    assert not stalled([Sample(0.0, 0, 100), Sample(61.0, 0, 100)], 60.0)  # drained


def test_a_stalled_round_is_said_so_in_its_figures_note() -> None:
    one = {**_round(40, 4, 280.0, 5.0), "stalled": "...", "results": 150, "expected_results": 160}
    raw = {"one_worker": [one], "two_workers": [_round(40, 8, 25.0, 3.0)]}
    bare, scaled = extraction_figures("apache", raw)
    assert "STALLED (4 workers): 150 of 160 results after 280 s" in bare.note
    assert "STALLED" in scaled.note
    assert "STALLED" not in extraction_figures("apache", {
        "one_worker": [_round(40, 4, 50.0, 5.0)], "two_workers": [_round(40, 8, 25.0, 3.0)]
    })[1].note  # fmt: skip
