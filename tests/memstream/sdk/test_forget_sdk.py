"""`MemoryClient`'s forget calls: which request goes to which topic and partition, said by whom,
and what is refused before anything is sent (a producer and a read model that only record)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from events.codec import AnyEvent
from events.forgetting import MemoryForgotten, SessionForgotten, UserForgotten
from events.turns import Principal
from handlers.identity import Refused
from memstream.config import load_settings
from memstream.sdk.client import MemoryClient, MemoryNotFound

Sent = tuple[str, AnyEvent, int | None]


class RecordingProducer:
    def __init__(self) -> None:
        self.sent: list[Sent] = []

    async def append(
        self, topic: str, events: Sequence[AnyEvent], *, partition: int | None = None
    ) -> None:
        self.sent.extend((topic, event, partition) for event in events)


class Reads:
    def __init__(self, memories: dict[tuple[str, str], str], receipts: list[Any]) -> None:
        self.memories = memories
        self.receipts = receipts

    async def read_model(self) -> Reads:  # the served read model (memstream.sdk.served)
        return self

    async def memory_type_of(self, user_id: str, memory_id: str) -> str | None:
        return self.memories.get((user_id, memory_id))

    async def erasure(self, request_id: str) -> Any:
        return next((r for r in self.receipts if r["_id"] == request_id), None)


def sdk(**options: Any) -> tuple[MemoryClient, RecordingProducer]:
    settings = load_settings(environ={"MEMSTREAM_CONFIG": "/dev/null", "MEMSTREAM_PARTITIONS": "3"})
    client = MemoryClient(settings, new_id=lambda: "req-1", **options)
    producer = RecordingProducer()
    client._shared.producer = producer  # type: ignore[assignment]
    reads = Reads(
        {("tim", "m1"): "episodic"},
        [{"_id": "theirs", "kind": "memory", "user_id": "tim", "steps": {}}],
    )
    client._shared.reads = reads  # type: ignore[assignment]
    return client, producer


def test_forget_sends_memory_forgotten_of_the_memorys_type_to_the_snapshots_topic() -> None:
    client, producer = sdk()
    assert asyncio.run(client.forget("tim", "m1", reason="wrong")) == "req-1"
    ((topic, request, partition),) = producer.sent
    assert topic == client.settings.kafka.topics.snapshots and partition is None
    assert isinstance(request, MemoryForgotten)
    assert (request.memory_type, request.requested_by, request.reason) == (
        "episodic",
        "sdk",
        "wrong",
    )


def test_forgetting_a_memory_the_user_does_not_have_raises_and_sends_nothing() -> None:
    client, producer = sdk()
    with pytest.raises(MemoryNotFound, match="'ann' has no memory 'm1'"):
        asyncio.run(client.forget("ann", "m1"))
    assert producer.sent == []


def test_forget_session_goes_to_the_turns_topic_keyed_by_the_session() -> None:
    client, producer = sdk(requested_by="cli:alice")
    asyncio.run(client.forget_session("tim", "s1"))
    ((topic, request, partition),) = producer.sent
    assert topic == client.settings.kafka.topics.turns and partition is None
    assert isinstance(request, SessionForgotten) and request.key == "tim|s1"
    assert request.requested_by == "cli:alice"


def test_forget_user_sends_one_copy_to_each_turns_partition_then_one_to_snapshots() -> None:
    client, producer = sdk()
    asyncio.run(client.forget_user("tim"))
    topics = client.settings.kafka.topics
    assert [(topic, partition) for topic, _, partition in producer.sent] == [
        (topics.turns, 0),
        (topics.turns, 1),
        (topics.turns, 2),
        (topics.snapshots, None),
    ]
    copies = [request for _, request, _ in producer.sent]
    assert all(isinstance(c, UserForgotten) and c.event_id == "req-1" for c in copies)
    assert [c.turns_partition for c in copies] == [0, 1, 2, None]  # type: ignore[union-attr]


def test_a_deployed_agent_forgets_as_its_principal_and_never_another_whole_user() -> None:
    client, producer = sdk()
    agent = client.acting_as(Principal(kind="service_account", id="sa-1"), deployed_agent=True)
    with pytest.raises(Refused):
        asyncio.run(agent.forget_user("tim"))
    assert producer.sent == []
    asyncio.run(agent.forget_session("tim", "s1"))  # its own session s1
    ((_, request, _),) = producer.sent
    assert request.user_id == "sa-1"  # type: ignore[union-attr]
    assert request.requested_by == "service_account:sa-1"  # type: ignore[union-attr]


def test_a_deployed_agent_does_not_see_another_users_receipt() -> None:
    client, _ = sdk()
    assert asyncio.run(client.erasure("theirs")) is not None
    agent = client.acting_as(Principal(kind="service_account", id="sa-1"), deployed_agent=True)
    assert asyncio.run(agent.erasure("theirs")) is None


def test_waiting_for_an_incomplete_erasure_times_out_naming_what_was_seen() -> None:
    client, _ = sdk()
    with pytest.raises(TimeoutError, match="theirs not complete"):
        asyncio.run(client.wait_for_erasure("theirs", timeout=0))
