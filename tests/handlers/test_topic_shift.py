"""The topic-shift trigger's arithmetic (`handlers.topic_shift`)."""

from __future__ import annotations

import math

import pytest

from handlers.topic_shift import (
    TopicShiftPolicy,
    TurnVector,
    is_topic_shift,
    topic_with,
    turn_vector,
)

POLICY = TopicShiftPolicy(threshold=0.5, min_turns=2)


def test_a_turn_far_from_the_topic_is_a_shift_once_the_window_holds_min_turns() -> None:
    far = TurnVector("m", (0.0, 1.0))
    assert not is_topic_shift((1.0, 0.0), "m", 1, far, POLICY)  # one turn: no topic yet
    assert is_topic_shift((1.0, 0.0), "m", 2, far, POLICY)
    near = TurnVector("m", (0.9, 0.1))
    assert not is_topic_shift((1.0, 0.0), "m", 2, near, POLICY)


def test_vectors_of_another_model_are_never_compared() -> None:
    far = TurnVector("other", (0.0, 1.0))
    assert not is_topic_shift((1.0, 0.0), "m", 5, far, POLICY)


def test_the_topic_is_the_running_mean_of_its_turns() -> None:
    topic, count = topic_with((), None, 0, TurnVector("m", (1.0, 0.0)))
    assert (topic, count) == ((1.0, 0.0), 1)
    topic, count = topic_with(topic, "m", count, TurnVector("m", (0.0, 1.0)))
    assert (topic, count) == ((0.5, 0.5), 2)
    topic, count = topic_with(topic, "m", count, TurnVector("m", (0.0, 1.0)))
    assert count == 3 and topic == pytest.approx((1 / 3, 2 / 3))


def test_a_turn_of_another_model_starts_the_topic_again() -> None:
    topic, count = topic_with((0.5, 0.5), "m", 4, TurnVector("new", (0.0, 1.0)))
    assert (topic, count) == ((0.0, 1.0), 1)


def test_vectors_and_means_keep_float32_precision_so_a_replay_compares_alike() -> None:
    vector = turn_vector("m", (1 / 3, math.pi))
    assert vector.vector == (0.3333333, 3.141593)
    topic, _ = topic_with((1 / 3,), "m", 1, TurnVector("m", (0.0,)))
    assert topic == (0.1666667,)


@pytest.mark.parametrize(("threshold", "min_turns"), [(1.5, 2), (-1.1, 2), (0.5, 0)])
def test_a_policy_outside_its_range_is_refused(threshold: float, min_turns: int) -> None:
    with pytest.raises(ValueError, match="topic_shift"):
        TopicShiftPolicy(threshold, min_turns)
