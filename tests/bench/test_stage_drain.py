"""The pure parts of the per-stage drain measurement (`bench.stage_drain`)."""

from __future__ import annotations

from faust.types import TP

from bench.stage_drain import Drain, Sample, drained, lag_of


def test_lag_is_end_minus_committed_summed_over_partitions() -> None:
    ends = {TP("t", 0): 10, TP("t", 1): 5, TP("u", 0): 3}
    committed: dict[TP, int | None] = {TP("t", 0): 4, TP("t", 1): 5}
    assert lag_of(ends, committed) == 6 + 0 + 3


def test_lag_never_counts_a_commit_beyond_the_end_as_negative() -> None:
    assert lag_of({TP("t", 0): 3}, {TP("t", 0): 7}) == 0


def test_drained_needs_quiet_samples_over_a_non_empty_input() -> None:
    assert not drained([Sample(1, 0, 10)])
    assert drained([Sample(1, 0, 10), Sample(2, 0, 10)])
    assert not drained([Sample(1, 0, 10), Sample(2, 1, 11)])
    assert not drained([Sample(1, 0, 0), Sample(2, 0, 0)])


def test_throughput_counts_from_ready_to_drained() -> None:
    drain = Drain("projector", 100, ready_seconds=5.0, drained_seconds=25.0)
    assert drain.drain_seconds == 20.0
    assert drain.records_per_second == 5.0


def test_json_keeps_at_most_about_max_samples_and_the_last_one() -> None:
    samples = [Sample(float(i), 100 - i, 100) for i in range(101)]
    shown = Drain("window", 100, 1.0, 100.0, samples).to_json(max_samples=10)
    assert len(shown["lag"]) <= 12
    assert shown["lag"][-1] == [100.0, 0]
