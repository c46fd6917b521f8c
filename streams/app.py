"""Building Faust apps: one app (one consumer group) per stage of the pipeline."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import faust
from faust.types import TableT

from streams.settings import StreamSettings


def faust_app(stage: str, settings: StreamSettings) -> faust.App:
    """A Faust app for `stage`: raw bytes in and out (events use our own codec), memory tables."""
    options: dict[str, Any] = {
        "broker": [f"kafka://{server.strip()}" for server in settings.bootstrap_servers.split(",")],
        "store": "memory://",
        # Faust makes `<datadir>/v1/tables` on start even for memory tables; its default datadir
        # is `<app id>-data` in the working directory, which left one folder per stage there.
        "datadir": str(Path(tempfile.gettempdir()) / "memstream-faust-{conf.id}"),
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
    credentials = settings.security.faust_credentials()
    if credentials is not None:
        options["broker_credentials"] = credentials
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


COMPACTED_CHANGELOG = {
    "segment.ms": str(10 * 60 * 1000),
    "segment.bytes": str(16 * 1024 * 1024),
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": str(60 * 60 * 1000),
}
"""Topic settings of every table's changelog (Faust makes it compacted: the broker keeps the
latest record per key). Kafka compacts only closed segments, by default 1 GB or a week each, so
without these a changelog keeps every write until it is that large and a worker that starts
replays them all: every progress update, every window ever stored. With segments closed every
10 minutes or 16 MB, compacted once a tenth of the log is overwritten, and deleted keys'
tombstones dropped an hour after compaction (a worker restoring the table reads it in seconds),
a start replays the live keys — open windows, partition progress — plus one open segment.
Tansu (in memory) does not compact; its log lives only as long as the broker anyway."""


def raw_table(app: faust.App, name: str, settings: StreamSettings) -> TableT[bytes, bytes | None]:
    """A table of raw bytes (no default value), partitioned like the pipeline's topics, its
    changelog compacted (`COMPACTED_CHANGELOG`)."""
    return app.Table(
        name,
        default=None,
        partitions=settings.partitions,
        key_type=bytes,
        value_type=bytes,
        extra_topic_configs=COMPACTED_CHANGELOG,
    )
