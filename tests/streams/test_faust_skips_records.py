"""Faust itself skips records around rebalances: the behaviour `streams/progress.py` guards against.

Plain Faust (no memstream code), on a real broker (Tansu and Apache Kafka): workers from
`tests/support/faust_skip_worker.py` with a slow agent that writes down every record it is
handed, and a table like every memstream stage has. A second worker joining and leaving the
group makes the first one rebalance while it has a backlog. Afterwards the group's committed
offsets (read over the public consumer API, without joining the group) are beyond records that
no agent was ever handed: Faust skipped them and committed past them.

Where it happens (faust-streaming 0.15.3; see the module docstring of the worker for settings):
with a table, a rebalance restores the changelogs with the flow resumed
(`faust/tables/recovery.py:450-452`) and `Recovery.on_recovery_completed` resumes the stream
partitions *before* seeking them to the committed offsets (`recovery.py:649-656`), so records
keep arriving while `Consumer.perform_seek` awaits the broker. When the seek lands,
`perform_seek` resets the consumer's read offset to the committed offset
(`faust/transport/consumer.py:565-580`); the next record of the batch already being drained is
far beyond it, and `_drain_messages` records the difference as a gap
(`consumer.py:1208-1215`, `_add_gap`), which `_new_offset` counts as acknowledged
(`consumer.py:1113-1128`) -- so the commit moves past those offsets. Then
`app.flow_control.resume()` (`recovery.py:659`) clears the agents' queues
(`mode/utils/queues.py:97-101`), dropping the records that were delivered during the seek but
not yet processed. Records both dropped and inside the gap are never handed to any agent, yet
committed. Without a table the worker takes `Recovery._resume_streams`, which seeks before it
resumes (the #216 fix) and did not lose records in our runs.

Measured on a 2-core machine (2026-11-30), whole test as written: the skip showed up in 11/11
runs on Tansu and 10/10 on Apache Kafka 4.1.1, after 1-10 join/leave cycles (cap 25; about a
quarter of the cycles produce a skip on either broker), 20-170 s per run. The same churn
without a table lost nothing (6 runs: 4 Tansu, 2 Apache). The stream-level skip of
#216/#221 (`faust/streams.py:1287-1300`: a record fetched before the rebalance, or arriving
while flow control is suspended, is acked at `streams.py:1342-1344` without being handed to
the agent) fired only a few times, at a worker's shutdown, and never moved a commit past a
record in these runs.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.support.brokers import only_on_the_first_broker

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


async def committed_offsets(
    bootstrap_servers: str, group: str, tps: list[TopicPartition]
) -> dict[TopicPartition, int | None]:
    """The group's committed offsets (None: nothing committed), read without joining the group.

    A consumer that carries the group id but never subscribes only sends OffsetFetch (after
    FindCoordinator): it is no member, so the group does not rebalance, and with auto-commit off
    it commits nothing. Works on Tansu, which lacks `list_consumer_group_offsets`.
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        return {tp: await consumer.committed(tp) for tp in tps}
    finally:
        await consumer.stop()


async def create_topic(bootstrap_servers: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


async def produce(bootstrap_servers: str, topic: str, counts: dict[int, int]) -> None:
    """`counts[p]` records into partition `p` (keys spread over a few table keys)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=5)
    await producer.start()
    try:
        sent = []
        for i in range(max(counts.values())):
            for partition, count in counts.items():
                if i < count:
                    key = f"k{partition}-{i % 7}".encode()
                    value = f"v{i}".encode()
                    sent.append(await producer.send(topic, value, key=key, partition=partition))
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


async def offsets_in_log(
    bootstrap_servers: str, tps: list[TopicPartition], counts: dict[int, int]
) -> dict[int, set[int]]:
    """The offsets of every record in the log (no group): what there is to hand to an agent."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        found: dict[int, set[int]] = {tp.partition: set() for tp in tps}
        while any(len(found[p]) < counts[p] for p in found):
            for tp, records in (await consumer.getmany(timeout_ms=1000)).items():
                found[tp.partition].update(record.offset for record in records)
        return found
    finally:
        await consumer.stop()


class Worker:
    """A `faust_skip_worker` child process; it appends `partition offset` lines to `received`."""

    def __init__(
        self,
        broker: Any,
        topic: str,
        group: str,
        partitions: int,
        workdir: Path,
        name: str,
        *,
        delay: float,
        table: bool,
    ) -> None:
        self.received = workdir / f"received-{name}.txt"
        self.log = workdir / f"{name}.log"
        args = [
            sys.executable,
            "-m",
            "tests.support.faust_skip_worker",
            broker.bootstrap_servers,
            topic,
            group,
            str(partitions),
            str(self.received),
            str(delay),
            *(["table"] if table else []),
        ]
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT), *filter(None, [environment.get("PYTHONPATH")])]
        )
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=environment
            )

    def handed(self) -> list[tuple[int, int]]:
        """(partition, offset) of every record the agent was handed so far."""
        if not self.received.exists():
            return []
        lines = self.received.read_text().splitlines()
        return [(int(p), int(o)) for p, o in (line.split() for line in lines if " " in line)]

    def assignments(self) -> int:
        """How many partition assignments the worker's consumer has received (aiokafka log)."""
        return self.log.read_text(errors="replace").count("Setting newly assigned partitions")

    def wait_handed(self, at_least: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.handed()) < at_least:
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited with {self.process.returncode}: {self.log}")
            if time.monotonic() > deadline:
                raise AssertionError(f"worker handed {len(self.handed())} records: {self.log}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # Faust's graceful shutdown
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()


def committed_now(broker: Any, group: str, tps: list[TopicPartition]) -> dict[int, int | None]:
    found = asyncio.run(
        asyncio.wait_for(committed_offsets(broker.bootstrap_servers, group, tps), 60)
    )
    return {tp.partition: offset for tp, offset in found.items()}


def test_committed_offsets_are_read_without_joining_the_group(
    broker: Any, workers: list[Worker], tmp_path: Path
) -> None:
    """`committed_offsets` reports what a running Faust worker committed and leaves its group be."""
    run = uuid.uuid4().hex[:8]
    topic, group = f"committed-{run}", f"committed-{run}"
    tps = [TopicPartition(topic, p) for p in range(3)]
    counts = {0: 5, 1: 3}  # partition 2 stays empty: nothing is ever committed for it
    asyncio.run(create_topic(broker.bootstrap_servers, topic, 3))
    asyncio.run(produce(broker.bootstrap_servers, topic, counts))
    worker = Worker(broker, topic, group, 3, tmp_path, "a", delay=0.0, table=False)
    workers.append(worker)
    worker.wait_handed(8, timeout=120)

    deadline = time.monotonic() + 60
    while (committed := committed_now(broker, group, tps)) != {0: 5, 1: 3, 2: None}:
        assert time.monotonic() < deadline, f"committed offsets {committed}"
        time.sleep(0.5)  # Faust commits every 2.8 s

    assignments = worker.assignments()
    assert assignments >= 1
    for _ in range(5):
        assert committed_now(broker, group, tps) == {0: 5, 1: 3, 2: None}
        time.sleep(1)
    time.sleep(4)  # longer than the worker's session timeout (3 s): a rebalance would show
    assert worker.assignments() == assignments, "reading the offsets made the group rebalance"
    assert worker.process.poll() is None
    assert sorted(worker.handed()) == [(0, o) for o in range(5)] + [(1, o) for o in range(3)]

    if broker.flavour == "apache":  # the admin API agrees where the broker supports it

        async def admin_view() -> tuple[dict[int, int], int]:
            admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
            await admin.start()
            try:
                offsets = await admin.list_consumer_group_offsets(group)
                (description,) = await admin.describe_consumer_groups([group])
                members = len(description.groups[0][5])
                return {tp.partition: meta.offset for tp, meta in offsets.items()}, members
            finally:
                await admin.close()

        offsets, members = asyncio.run(asyncio.wait_for(admin_view(), 60))
        assert offsets == {0: 5, 1: 3}
        assert members == 1, "the reader must not be a member of the group"


PARTITIONS = 4
PER_PARTITION = 10_000  # a backlog that outlasts the churn (the agent takes ~150 records/s)
AGENT_DELAY = 0.005
MAX_CYCLES = 25


def never_handed(
    committed: dict[int, int | None], in_log: dict[int, set[int]], workers: list[Worker]
) -> dict[int, list[int]]:
    """Per partition: the records below the group's committed offset no agent was handed."""
    handed: dict[int, set[int]] = {p: set() for p in in_log}
    for worker in workers:
        for partition, offset in worker.handed():
            handed[partition].add(offset)
    return {
        p: sorted(o for o in in_log[p] if o < (committed[p] or 0) and o not in handed[p])
        for p in in_log
    }


def test_faust_commits_past_records_it_never_handed_to_the_agent(
    broker: Any, workers: list[Worker], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A second worker joins and leaves the group while the first has a backlog, until the
    group's committed offsets pass records no agent was handed (at most `MAX_CYCLES` times);
    then every worker stops and the final committed offsets are checked against what the
    agents were handed. Faust skipped those records and committed past them (see the module
    docstring): after a restart nothing would ever hand them to an agent."""
    only_on_the_first_broker(
        request.config,
        broker.flavour,
        "the skip is Faust's, seen on both brokers (module docstring); 30-100 s per run",
    )
    run = uuid.uuid4().hex[:8]
    topic, group = f"skips-{run}", f"skips-{run}"
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    counts = {p: PER_PARTITION for p in range(PARTITIONS)}
    asyncio.run(create_topic(broker.bootstrap_servers, topic, PARTITIONS))
    asyncio.run(produce(broker.bootstrap_servers, topic, counts))
    in_log = asyncio.run(
        asyncio.wait_for(offsets_in_log(broker.bootstrap_servers, tps, counts), 60)
    )

    def start(name: str) -> Worker:
        worker = Worker(
            broker, topic, group, PARTITIONS, tmp_path, name, delay=AGENT_DELAY, table=True
        )
        workers.append(worker)
        return worker

    first = start("a")
    first.wait_handed(1, timeout=120)
    cycles = 0
    while cycles < MAX_CYCLES:
        cycles += 1
        second = start(f"b{cycles}")
        second.wait_handed(1, timeout=120)  # it joined: the first worker gave partitions up
        time.sleep(1)
        second.stop()  # it left: the first worker takes every partition again
        time.sleep(2)
        assert first.process.poll() is None, f"the first worker exited: {first.log}"
        if any(never_handed(committed_now(broker, group, tps), in_log, workers).values()):
            break
    for worker in workers:
        worker.stop()

    committed = committed_now(broker, group, tps)
    assert all((committed[p] or 0) < PER_PARTITION for p in range(PARTITIONS)), "backlog ran out"
    skipped = never_handed(committed, in_log, workers)
    summary = {p: (len(s), s[:3]) for p, s in skipped.items() if s}
    print(f"{broker.flavour}: {cycles} cycles; committed {committed}; never handed: {summary}")
    assert summary, f"Faust handed every committed record to an agent in {cycles} cycles"
