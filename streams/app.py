"""Building Faust apps: one app (one consumer group) per stage of the pipeline."""

from __future__ import annotations

from typing import Any

import faust
from faust.types import TableT

from streams.settings import StreamSettings


def faust_app(stage: str, settings: StreamSettings) -> faust.App:
    """A Faust app for `stage`: raw bytes in and out (events use our own codec), memory tables."""
    options: dict[str, Any] = {
        "broker": [f"kafka://{server.strip()}" for server in settings.bootstrap_servers.split(",")],
        "store": "memory://",
        "autodiscover": False,
        "web_enabled": False,
        "key_serializer": "raw",
        "value_serializer": "raw",
        "topic_partitions": settings.partitions,
        "topic_replication_factor": settings.replication_factor,
        "consumer_auto_offset_reset": "earliest",
        "producer_acks": -1,
        "broker_session_timeout": settings.session_timeout_seconds,
        "broker_rebalance_timeout": settings.session_timeout_seconds,
        "broker_heartbeat_interval": settings.heartbeat_interval_seconds,
        "table_standby_replicas": 0,
        "stream_wait_empty": False,
    }
    if settings.producer_max_batch_size is not None:
        options["producer_max_batch_size"] = settings.producer_max_batch_size
    if settings.producer_request_timeout_seconds is not None:
        options["producer_request_timeout"] = settings.producer_request_timeout_seconds
    return faust.App(settings.group(stage), **options)


def raw_topic(app: faust.App, name: str, settings: StreamSettings) -> faust.TopicT:
    """A topic of raw bytes with the pipeline's partition count."""
    return app.topic(
        name,
        key_type=bytes,
        value_type=bytes,
        partitions=settings.partitions,
        replicas=settings.replication_factor,
    )


def raw_table(app: faust.App, name: str, settings: StreamSettings) -> TableT[bytes, bytes | None]:
    """A table of raw bytes (no default value), partitioned like the pipeline's topics."""
    return app.Table(
        name, default=None, partitions=settings.partitions, key_type=bytes, value_type=bytes
    )
