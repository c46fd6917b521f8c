"""A plain Faust worker with a slow agent that records every record it is handed.

Run as a child process by `tests/streams/test_faust_skips_records.py`:

    python -m tests.support.faust_skip_worker BOOTSTRAP TOPIC GROUP PARTITIONS OUT DELAY [table]

Each record the agent receives is appended to OUT as `partition offset` (one line, flushed at
once, before the agent's work), so OUT lists exactly what Faust handed to the agent. `table`
adds a Faust table the agent writes for every record, like memstream's stages (table recovery
takes a different route through Faust's rebalance code). Nothing here is memstream code: no
guard, only public Faust API and settings like memstream's stage apps.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import faust


def build_app(
    bootstrap: str, topic: str, group: str, partitions: int, out: str, delay: float, table: bool
) -> faust.App:
    app = faust.App(
        group,
        broker=f"kafka://{bootstrap}",
        # Faust's default data folder is `<app id>-data` in the working directory (the
        # repository root here): the test's own folder instead.
        datadir=str(Path(out).parent / f"{group}-data"),
        store="memory://",
        autodiscover=False,
        web_enabled=False,
        key_serializer="raw",
        value_serializer="raw",
        topic_partitions=partitions,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        producer_max_batch_size=1,  # exact end offsets on Tansu (table recovery)
        broker_session_timeout=3,
        broker_rebalance_timeout=3,
        broker_heartbeat_interval=0.5,
        table_standby_replicas=0,
        stream_wait_empty=False,
    )
    source = app.topic(topic, key_type=bytes, value_type=bytes, partitions=partitions)
    received = open(out, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    counts = (
        app.Table("counts", default=int, partitions=partitions, key_type=bytes, value_type=int)
        if table
        else None
    )

    @app.agent(source)
    async def slow(stream: faust.StreamT[bytes]) -> None:
        async for event in stream.events():
            message = event.message
            received.write(f"{message.partition} {message.offset}\n")
            if counts is not None:
                counts[event.key or b""] += 1
            await asyncio.sleep(delay)

    return app


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    bootstrap, topic, group, partitions, out, delay, *rest = argv
    app = build_app(
        bootstrap, topic, group, int(partitions), out, float(delay), table="table" in rest
    )
    faust.Worker(app, loglevel="info", override_logging=False).execute_from_commandline()


if __name__ == "__main__":
    main(sys.argv[1:])
