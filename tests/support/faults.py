"""Outages for integration tests: a broker or SecantusDB behind a :class:`FaultProxy`.

``proxied_broker`` starts a dedicated broker (Tansu keeps its log in memory, so it cannot be
stopped and restarted without losing it) that *advertises* a proxy's port: every client
connection after the first metadata request goes through the proxy, so ``proxy.cut()`` and
``proxy.block_produce()`` reach producers, consumers and the group coordinator alike.
``produce_direct`` writes records on a connection of its own straight to the broker's real
port (a normal client would follow the advertised address into the proxy).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from os import PathLike
from typing import Any
from urllib.parse import urlsplit

from memstream.runtime.servers import ApacheKafkaBroker, SecantusServer, TansuBroker
from tests.support.fault_proxy import FaultProxy

__all__ = ["BROKER_FLAVOURS", "produce_direct", "proxied_broker", "proxied_mongo"]

BROKER_FLAVOURS: dict[str, type[TansuBroker] | type[ApacheKafkaBroker]] = {
    "tansu": TansuBroker,
    "apache": ApacheKafkaBroker,
}


@contextmanager
def proxied_broker(
    flavour: str, workdir: str | PathLike[str], **broker_options: Any
) -> Iterator[tuple[TansuBroker | ApacheKafkaBroker, FaultProxy]]:
    """A fresh broker of `flavour` ("tansu" or "apache") advertising a proxy in front of it.

    Order matters: the proxy listens first (its port becomes the broker's advertised port, and
    the broker's readiness probe already goes through it), then the broker gets its own port,
    then the proxy learns that port as its upstream. Bootstrap with ``broker.bootstrap_servers``
    (real port) or ``proxy.address``: both end up on the proxy. ``broker.flavour`` is set.
    """
    with FaultProxy(0, name=f"{flavour}-proxy") as proxy:
        broker = BROKER_FLAVOURS[flavour](
            workdir, advertised_port=proxy.listen_port, **broker_options
        )
        broker.flavour = flavour  # type: ignore[union-attr]  # as the conftest broker fixture
        proxy.upstream_port = broker.port
        with broker:
            yield broker, proxy


@contextmanager
def proxied_mongo(
    mongo: SecantusServer | str, *, name: str = "mongo-proxy"
) -> Iterator[tuple[FaultProxy, str]]:
    """A plain TCP proxy in front of a running SecantusDB; yields it and a URI through it.

    The URI has ``directConnection=true``: otherwise pymongo may take the server's own view of
    its address (a replica-set member answers with its hosts) and connect past the proxy.
    """
    uri = mongo.uri if isinstance(mongo, SecantusServer) else mongo
    parts = urlsplit(uri)
    if parts.port is None or "," in parts.netloc:
        raise ValueError(f"need a single-host mongodb URI with a port, not {uri!r}")
    with FaultProxy(
        parts.port, upstream_host=parts.hostname or "127.0.0.1", kafka=False, name=name
    ) as proxy:
        yield proxy, f"mongodb://{proxy.address}/?directConnection=true"


async def produce_direct(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes]],
    *,
    partition: int = 0,
    timeout_ms: int = 10_000,
) -> None:
    """Append `records` (key, value) to one partition over a direct connection to `bootstrap`.

    It sends one Produce request (acks=all) on a connection of its own and never asks for
    metadata, so it bypasses an advertised proxy. Raises the broker's error, if any.
    """
    from aiokafka.conn import create_conn
    from aiokafka.errors import NoError, for_code
    from aiokafka.protocol.produce import ProduceRequest
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    now = int(time.time() * 1000)
    for offset, (key, value) in enumerate(records):
        builder.append(offset, timestamp=now, key=key, value=value, headers=[])
    host, _, port = bootstrap.rpartition(":")
    conn = await create_conn(host, int(port), request_timeout_ms=timeout_ms)
    try:
        request = ProduceRequest(
            transactional_id=None,
            required_acks=-1,
            timeout=timeout_ms,
            topics=[(topic, [(partition, bytes(builder.build()))])],
        )
        response = await conn.send(request)
    finally:
        conn.close()
    for _topic, partitions in response.topics:
        for partition_info in partitions:
            error = for_code(partition_info[1])
            if error is not NoError:
                raise error(f"direct produce to {topic}[{partition}]")
