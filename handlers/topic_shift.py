"""The window's topic-shift trigger: a turn far from what the open window is about starts a new
snapshot (docs/architecture.md, "Stages", the window).

The window keeps the mean of its pending turns' embeddings (`SessionWindow.topic`, with the model
that made them). A new turn whose embedding has a cosine similarity below the threshold with
that mean, once the window holds `min_turns` embedded turns, promotes the pending turns first
(reason `topic_shift`). Pure: the stage embeds the turns (the configured embedding model,
pinned: a window's mean is compared only with vectors of the model that made it) and hands the
vectors in, rounded to float32 precision, so a replay with the same model gives the same
vectors and promotes the same snapshots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from handlers.vectors import cosine, rounded


@dataclass(frozen=True)
class TurnVector:
    """A turn's embedding and the model that made it."""

    model: str
    vector: tuple[float, ...]


@dataclass(frozen=True)
class TopicShiftPolicy:
    """`threshold`: the cosine similarity below which a turn leaves the window's topic;
    `min_turns`: how many embedded turns a window holds before it has a topic to leave."""

    threshold: float
    min_turns: int = 2

    def __post_init__(self) -> None:
        if not -1.0 <= self.threshold <= 1.0:
            raise ValueError("topic_shift_threshold must be between -1 and 1")
        if self.min_turns < 1:
            raise ValueError("topic_shift_min_turns must be at least 1")


def turn_vector(model: str, vector: Sequence[float]) -> TurnVector:
    """A turn's embedding as the window compares it: rounded to float32 precision, so the same
    model's vectors compare alike on any machine that computes them to that precision."""
    return TurnVector(model, rounded(vector))


def is_topic_shift(
    topic: Sequence[float],
    topic_model: str | None,
    topic_turns: int,
    turn: TurnVector,
    policy: TopicShiftPolicy,
) -> bool:
    """Whether `turn` leaves the topic of a window whose mean embedding is `topic`."""
    if topic_turns < policy.min_turns or topic_model != turn.model or not topic:
        return False
    return cosine(topic, turn.vector) < policy.threshold


def topic_with(
    topic: Sequence[float], topic_model: str | None, topic_turns: int, turn: TurnVector
) -> tuple[tuple[float, ...], int]:
    """The window's mean embedding and count with `turn` added (a mean made by another model is
    started again from `turn`)."""
    if topic_model != turn.model or not topic or topic_turns < 1:
        return rounded(turn.vector), 1
    count = topic_turns + 1
    mean = [(m * topic_turns + v) / count for m, v in zip(topic, turn.vector, strict=True)]
    return rounded(mean), count
