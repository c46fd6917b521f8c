"""The SDK's Kafka producer: events appended with `acks=all`, idempotent where the broker allows.

`kafka.idempotent_producer` (`auto` by default) asks for an idempotent producer, so the
producer's own retries never write an event twice; with `auto` a broker without producer ids
(Tansu) gets a plain producer instead. The window drops a re-sent turn by its event id either way.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from events.codec import AnyEvent, encode
from memstream.config import KafkaSettings
from streams.kafka_security import start_client

log = logging.getLogger(__name__)


@contextmanager
def _quiet_producer_id_errors(quiet: bool) -> Iterator[None]:
    """While probing for an idempotent producer, aiokafka logs a broker's refusal of producer
    ids as an ERROR; with `auto` that refusal is expected and handled, so the line is dropped."""
    sender_log = logging.getLogger("aiokafka.producer.sender")

    def refusal(record: logging.LogRecord) -> bool:
        return "InitProducerIdRequest" not in record.getMessage()

    if quiet:
        sender_log.addFilter(refusal)
    try:
        yield
    finally:
        sender_log.removeFilter(refusal)


class EventProducer:
    """Appends events to their topics, keyed by their stream key, waiting for the broker."""

    def __init__(
        self, kafka: KafkaSettings, encoder: Callable[[AnyEvent], Awaitable[bytes]] | None = None
    ) -> None:
        """`encoder`: how an event becomes its record (default: `events.codec.encode`; the
        client's seals content, `memstream.keystore.sealing`)."""
        self._kafka = kafka
        self._encoder = encoder
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        if self._producer is not None:
            return
        if not self._kafka.bootstrap_servers:
            raise ValueError("KAFKA_BOOTSTRAP_SERVERS is not set (is `memstream up` running?)")
        mode = self._kafka.idempotent_producer
        if mode != "off":
            try:
                with _quiet_producer_id_errors(mode == "auto"):
                    self._producer = await self._started(idempotent=True)
                return
            except KafkaError as exc:
                if mode == "on":
                    raise
                log.info("the broker refused an idempotent producer (%r); using a plain one", exc)
        self._producer = await self._started(idempotent=False)

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    async def append(
        self, topic: str, events: Sequence[AnyEvent], *, partition: int | None = None
    ) -> None:
        """Send `events` in order and wait until the broker has all of them: to the partition
        of their key, or to `partition` (a `UserForgotten` copy goes to every turns partition,
        whatever its key)."""
        if self._producer is None:
            raise RuntimeError("call `await client.start()` (or use `async with`) before writing")
        futures = [
            await self._producer.send(
                topic,
                await self._encoder(event) if self._encoder is not None else encode(event),
                key=event.key.encode(),  # type: ignore[union-attr]
                partition=partition,
            )
            for event in events
        ]
        for future in futures:
            await future

    async def _started(self, *, idempotent: bool) -> AIOKafkaProducer:
        producer = AIOKafkaProducer(
            **self._kafka.client_options(),
            acks="all",
            linger_ms=5,
            enable_idempotence=idempotent,
        )
        await start_client(producer, self._kafka.bootstrap_servers or "", self._kafka.security)
        return producer
