"""The sealing benchmark's workload and figures (a tiny run: speed is not asserted)."""

from __future__ import annotations

import orjson

from bench.suites.sealing import (
    TURN_SIZES,
    bench_key,
    figures_of,
    measure,
    seal_and_open,
    sealed_record,
    turn_of,
)
from events.codec import encode
from events.sealed import sealed_json_bytes


def test_each_turn_size_holds_exactly_that_many_content_bytes() -> None:
    assert [len(turn_of(size).content.encode()) for size in TURN_SIZES] == [
        size.content_bytes for size in TURN_SIZES
    ]


def test_the_timed_round_trip_opens_to_the_turns_content() -> None:
    turn = turn_of(TURN_SIZES[1])
    assert seal_and_open(turn, bench_key())() == turn.content


def test_the_sealed_record_differs_from_the_plain_one_by_the_envelope_only() -> None:
    turn = turn_of(TURN_SIZES[1])
    plain_content = len(orjson.dumps(turn.content))
    expected = len(encode(turn)) - plain_content + sealed_json_bytes(len(turn.content.encode()))
    assert len(sealed_record(turn, bench_key())) == expected


def test_a_measurement_gives_a_time_and_a_size_figure_per_turn_size() -> None:
    size = TURN_SIZES[0]
    measured = measure(size, iterations=20, rounds=2)
    assert [len(measured["micros"][side]) for side in ("memstream", "baseline")] == [2, 2]
    time, record = figures_of(size, measured)
    assert time.unit == "µs per turn" and time.ratio is not None and time.ratio > 0
    assert record.ours > record.baseline
