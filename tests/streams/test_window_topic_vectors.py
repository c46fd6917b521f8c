"""The window stage's embedding of a batch's turns for the topic-shift trigger
(`streams.window.WindowStage.turn_vectors`), with an embedder in memory and no broker."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from events.codec import encode
from events.turns import SessionFlushRequested, TurnRecorded
from handlers.inputs import TurnsTopicEvent
from handlers.topic_shift import TurnVector
from memstream.config import load_settings
from memstream.runtime.worker import stream_settings
from streams.app import faust_app
from streams.records import InputRecord
from streams.sealing import NO_KEYS
from streams.settings import utc_now
from streams.window import STAGE, WindowStage
from tests import factories as f


class Embedder:
    """Answers every text with the same vector, or refuses every call."""

    model_name = "test-embedder"
    dimension = 2

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.refuse:
            raise ValueError("input too long")
        return [[1 / 3, 2 / 3] for _ in texts]


def stage(embedder: Embedder, **environment: str) -> WindowStage:
    settings = load_settings(
        environ={
            "MEMSTREAM_CONFIG": "/dev/null",
            "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9",
            "MEMSTREAM_SEAL_CONTENT": "false",
            **environment,
        }
    )
    streams = stream_settings(settings)
    return WindowStage(faust_app(STAGE, streams), streams, utc_now, NO_KEYS, embedder)


def records(*events: TurnRecorded | SessionFlushRequested | bytes) -> list[InputRecord]:
    """The events as the turns topic holds them (a bytes value: a record that is not one)."""
    return [
        InputRecord("turns", 0, offset, *_key_and_value(event))
        for offset, event in enumerate(events)
    ]


def _key_and_value(event: TurnRecorded | SessionFlushRequested | bytes) -> tuple[bytes, bytes]:
    if isinstance(event, bytes):
        return b"u1", event
    return event.key.encode(), encode(event)


ON = {"MEMSTREAM_TOPIC_SHIFT_THRESHOLD": "0.2"}


def test_the_batchs_turns_are_embedded_in_one_call_by_turn_id_and_rounded() -> None:
    embedder = Embedder()
    first, second = f.turn(content="tennis"), f.turn(content="pasta")
    batch = records(first, f.flush(), b"not json", second)
    vectors = asyncio.run(stage(embedder, **ON).turn_vectors(batch))
    assert embedder.calls == [["tennis", "pasta"]]
    expected = TurnVector("test-embedder", (0.3333333, 0.6666667))
    assert vectors == {first.event_id: expected, second.event_id: expected}


def test_a_batch_the_embedder_refuses_is_decided_without_vectors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    vectors = asyncio.run(stage(Embedder(refuse=True), **ON).turn_vectors(records(f.turn())))
    assert vectors == {}
    assert "the embedder refused 1 turns" in caplog.text


def test_without_the_trigger_nothing_is_embedded() -> None:
    embedder = Embedder()
    assert asyncio.run(stage(embedder).turn_vectors(records(f.turn()))) == {}
    assert embedder.calls == []


def test_the_records_read_to_embed_are_kept_by_position_for_deciding() -> None:
    turn, flush = f.turn(content="tennis"), f.flush()
    read: dict[tuple[int, int], TurnsTopicEvent] = {}
    batch = records(turn, b"not json", flush)
    asyncio.run(stage(Embedder(), **ON).turn_vectors(batch, read))
    assert read == {(0, 0): turn, (0, 2): flush}  # the unreadable record is left to `apply`
