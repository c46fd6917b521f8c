"""Window: turns/s through the real window stage vs a bare consume→produce loop; idle latency.

    python -m bench window [--quick] [--brokers apache,tansu]

**Throughput**, on each broker, alternating which side runs first from round to round. Each
side gets a fresh prefix (topics, consumer group) and the same pre-produced `TurnRecorded`
records (sessions of `max_messages` turns, so every session is promoted by count on its last
turn) before its consumer starts:

- memstream: the window stage as `memstream up` runs it (`python -m memstream worker --stage
  window`, a child process). Timed from its ready marker (printed as Faust resumes its
  partitions and starts fetching) until a client reading the snapshots topic has received
  snapshots holding every turn. The time until the group's committed offsets reach the end of
  the turns topic (Faust commits every 2.8 s) and the worker's start-up are kept in `raw`.
- baseline: an aiokafka consumer (its own group) and producer in this process: `getmany`,
  send every record to an output topic (same key, same bytes, `acks=all`), wait for the acks,
  commit; timed from its partition assignment until every record is acknowledged and committed.

**Idle promotion latency.** A window worker with a short `idle_timeout`
(`MEMSTREAM_IDLE_TIMEOUT`) and `idle_check_interval` (`MEMSTREAM_IDLE_CHECK_INTERVAL`); a few
sessions record three turns each through the SDK and fall silent, staggered over one check
interval so they meet the timer at different phases. Latency: from `record()` returning to a
client receiving the session's snapshot (reason `idle`). The wall clock only triggers: the
timer notices the quiet session on its next tick and writes a `SessionIdled` command to the
turns topic, which the window applies like any record (docs/architecture.md, "Time"), so the
latency is the timeout, plus up to one check interval, plus the command's and the snapshot's
trips through the broker. Baseline: the configured timeout; ratio latency/timeout.

The suite runs no database, so content is not sealed (`MEMSTREAM_SEAL_CONTENT=false`: the data
keys live in MongoDB); `python -m bench encryption` prices sealing.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener

from bench.core import Aim, BenchContext, Figure, SuiteResult, alternate, median
from bench.kafka_probe import (
    Arrival,
    TopicTail,
    committed_at_end,
    cpu_seconds,
    produce_all,
    wait_ready,
)
from events.codec import decode, encode
from events.snapshots import SnapshotPromoted
from events.turns import TurnRecorded
from memstream.config import Settings, load_settings
from memstream.runtime.pipeline import KAFKA_ENVIRONMENT, TANSU_ENVIRONMENT, StageProcess
from memstream.runtime.topics import ensure_topics
from memstream.sdk.client import MemoryClient

MAX_MESSAGES = 20
"""The window's default `max_messages`: every benchmark session is promoted by count."""
CONCURRENT_SESSIONS = 10
"""Sessions whose turns are interleaved in the log, as when many conversations run at once."""
START_TIMEOUT = 120.0
CONTENT = "I would like to book a table for two at seven tonight, by the window if possible."


# ---- pure helpers ------------------------------------------------------------------------------


def session_turns(
    turns: int, per_session: int, now: datetime, concurrent: int = CONCURRENT_SESSIONS
) -> list[TurnRecorded]:
    """`turns` turns in sessions of `per_session`, in log order: `concurrent` sessions at a
    time, their turns interleaved. Every session is full (`turns` must be a multiple)."""
    if per_session < 1 or turns % per_session:
        raise ValueError(f"{turns} turns do not make sessions of {per_session}")
    sessions = turns // per_session
    ordered: list[TurnRecorded] = []
    for first in range(0, sessions, concurrent):
        group = range(first, min(first + concurrent, sessions))
        for index in range(per_session):
            for session in group:
                ordered.append(
                    TurnRecorded(
                        event_id=f"bench-{session}-{index}",
                        occurred_at=now,
                        recorded_at=now,
                        user_id=f"u{session % 50}",
                        session_id=f"s{session}",
                        role="user" if index % 2 == 0 else "assistant",
                        content=f"{index}: {CONTENT}",
                    )
                )
    return ordered


def promoted_turns(arrivals: Sequence[Arrival]) -> set[str]:
    """The ids of the turns held by the snapshots received so far."""
    return {
        turn.turn_id
        for arrival in arrivals
        if isinstance(snapshot := decode(arrival.record.value or b""), SnapshotPromoted)
        for turn in snapshot.turns
    }


def per_second(count: int, seconds: float) -> float:
    if seconds <= 0:
        raise ValueError(f"not a duration: {seconds}")
    return count / seconds


def cpu_per_thousand(rounds: Sequence[dict[str, Any]], turns: int) -> float | None:
    """The median CPU seconds per 1000 turns over `rounds` (None if a round has no figure)."""
    spent = [r.get("cpu_seconds") for r in rounds]
    if not spent or any(s is None for s in spent):
        return None
    return median([s * 1000 / turns for s in spent if s is not None])


def stagger(sessions: int, interval: float) -> list[float]:
    """Offsets (seconds) at which each idle-latency session records its last turn: spread over
    one check interval, so the sessions meet the idle timer at different phases."""
    return [interval * index / sessions for index in range(sessions)]


@dataclass(frozen=True)
class IdleSetting:
    """The idle timeout and check interval a window worker runs with, and how many sessions
    fall silent in one measurement."""

    timeout: float
    check_interval: float
    sessions: int

    @property
    def label(self) -> str:
        return f"idle_timeout {self.timeout:g} s, checked every {self.check_interval:g} s"

    def describe(self) -> dict[str, Any]:
        return {
            "timeout": self.timeout,
            "check_interval": self.check_interval,
            "sessions": self.sessions,
            "label": self.label,
        }


# ---- throughput --------------------------------------------------------------------------------


def _environment(bootstrap: str, kind: str, **extra: str) -> dict[str, str]:
    run = uuid.uuid4().hex[:8]
    return {
        "MEMSTREAM_CONFIG": "/dev/null",
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "MEMSTREAM_TOPIC_PREFIX": f"bench-window-{run}.",
        "MEMSTREAM_GROUP_PREFIX": f"bench-window-{run}-",
        "MEMSTREAM_MAX_MESSAGES": str(MAX_MESSAGES),
        "MEMSTREAM_SEAL_CONTENT": "false",  # no database for the data keys in this suite
        **(TANSU_ENVIRONMENT if kind == "tansu" else KAFKA_ENVIRONMENT),
        **extra,
    }


async def window_round(
    bootstrap: str,
    kind: str,
    payloads: list[tuple[bytes, bytes]],
    log_dir: Path,
    idle: IdleSetting,
    broker_pid: int | None = None,
    **extra: str,
) -> dict[str, Any]:
    """The window stage over `payloads`, pre-produced: seconds, rates and start-up; then, on
    the same worker, the idle latency of `idle.sessions` sessions. `extra`: more of the
    worker's environment."""
    env = _environment(
        bootstrap,
        kind,
        MEMSTREAM_IDLE_TIMEOUT=str(idle.timeout),
        MEMSTREAM_IDLE_CHECK_INTERVAL=str(idle.check_interval),
        **extra,
    )
    settings = load_settings(environ=env)
    kafka = settings.kafka
    await ensure_topics(kafka)
    if payloads:
        await produce_all(bootstrap, kafka.topics.turns, payloads)
    tail = await TopicTail(bootstrap, kafka.topics.snapshots, kafka.partitions).start()
    launched = time.perf_counter()
    worker = StageProcess("window", env, log_dir, log_name=f"{env['MEMSTREAM_GROUP_PREFIX']}.log")
    worker.start()
    result: dict[str, Any] = {}
    try:
        started = await wait_ready(worker, START_TIMEOUT)
        cpu = (cpu_seconds(worker.pid), cpu_seconds(broker_pid))
        result["startup_seconds"] = started - launched
        if payloads:
            done = await tail.wait_until(
                lambda arrivals: len(promoted_turns(arrivals)) >= len(payloads),
                timeout=300,
                what="window promoting every turn",
            )
            committed = await committed_at_end(
                bootstrap,
                kafka.group_prefix + "window",
                kafka.topics.turns,
                kafka.partitions,
                timeout=60,
            )
            result |= {
                "turns_per_s": per_second(len(payloads), done - started),
                "seconds": done - started,
                "seconds_to_commit": committed - started,
                "snapshots": len(tail.arrivals),
                "cpu_seconds": _spent(cpu[0], cpu_seconds(worker.pid)),
                "broker_cpu_seconds": _spent(cpu[1], cpu_seconds(broker_pid)),
            }
        result["idle"] = await idle_latencies(settings, tail, idle)
    finally:
        worker.kill()
        await tail.stop()
    return result


def _spent(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


class _Assigned(ConsumerRebalanceListener):  # type: ignore[misc]
    """Notes when the consumer got its partitions, and the CPU used so far."""

    def __init__(self, broker_pid: int | None) -> None:
        self.broker_pid = broker_pid
        self.at: float | None = None
        self.cpu: tuple[float, float | None] = (0.0, None)

    async def on_partitions_revoked(self, revoked: Any) -> None:
        pass

    async def on_partitions_assigned(self, assigned: Any) -> None:
        if assigned and self.at is None:
            self.at = time.perf_counter()
            self.cpu = (time.process_time(), cpu_seconds(self.broker_pid))


async def bare_round(
    bootstrap: str, kind: str, payloads: list[tuple[bytes, bytes]], broker_pid: int | None = None
) -> dict[str, Any]:
    """A bare aiokafka consume→produce→commit loop moving `payloads`, pre-produced."""
    settings = load_settings(environ=_environment(bootstrap, kind))
    kafka = settings.kafka
    await ensure_topics(kafka)
    await produce_all(bootstrap, kafka.topics.turns, payloads)
    launched = time.perf_counter()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=kafka.group_prefix + "bare",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    await consumer.start()
    listener = _Assigned(broker_pid)
    consumer.subscribe([kafka.topics.turns], listener=listener)
    try:
        moved = 0
        deadline = time.monotonic() + 300
        while moved < len(payloads):
            if time.monotonic() > deadline:
                raise TimeoutError(f"bare loop moved {moved} of {len(payloads)} records")
            batches = await consumer.getmany(timeout_ms=100)
            futures = [
                await producer.send(kafka.topics.snapshots, record.value, key=record.key)
                for records in batches.values()
                for record in records
            ]
            if futures:
                await asyncio.gather(*futures)
                await consumer.commit()
                moved += len(futures)
        done = time.perf_counter()
        cpu = (time.process_time(), cpu_seconds(broker_pid))
    finally:
        await consumer.stop()
        await producer.stop()
    assert listener.at is not None
    return {
        "turns_per_s": per_second(len(payloads), done - listener.at),
        "seconds": done - listener.at,
        "startup_seconds": listener.at - launched,
        "cpu_seconds": cpu[0] - listener.cpu[0],
        "broker_cpu_seconds": _spent(listener.cpu[1], cpu[1]),
    }


async def throughput(
    bootstrap: str,
    kind: str,
    turns: int,
    rounds: int,
    log_dir: Path,
    idle: IdleSetting,
    broker_pid: int | None,
) -> dict[str, list[dict[str, Any]]]:
    """`rounds` rounds of each side, alternating which goes first."""
    records = session_turns(turns, MAX_MESSAGES, datetime.now(UTC))
    payloads = [(record.key.encode(), encode(record)) for record in records]
    sides: dict[str, list[dict[str, Any]]] = {"baseline": [], "memstream": []}
    for _, baseline_first in alternate(rounds):
        for side in ("baseline", "memstream") if baseline_first else ("memstream", "baseline"):
            if side == "baseline":
                result: dict[str, Any] = await bare_round(bootstrap, kind, payloads, broker_pid)
            else:
                result = await window_round(bootstrap, kind, payloads, log_dir, idle, broker_pid)
            sides[side].append(result)
            shown = {k: round(v, 3) for k, v in result.items() if isinstance(v, float)}
            print(f"   window {kind} {side}: {shown}", file=sys.stderr, flush=True)
    return sides


# ---- idle promotion latency --------------------------------------------------------------------


async def idle_latencies(settings: Settings, tail: TopicTail, idle: IdleSetting) -> dict[str, Any]:
    """Record three turns in each of `idle.sessions` sessions, staggered over one check
    interval, then wait for each session's idle snapshot: seconds from `record()` returning to
    the snapshot's arrival, per session."""
    user = f"idle-{uuid.uuid4().hex[:8]}"
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {CONTENT}"}
        for i in range(3)
    ]
    last_turn: dict[str, float] = {}
    async with MemoryClient(settings) as client:
        began = time.perf_counter()
        for index, offset in enumerate(stagger(idle.sessions, idle.check_interval)):
            await asyncio.sleep(max(0.0, began + offset - time.perf_counter()))
            await client.record(user, f"s{index}", messages)
            last_turn[f"s{index}"] = time.perf_counter()
    seen: dict[str, float] = {}

    def all_promoted(arrivals: list[Arrival]) -> bool:
        for arrival in arrivals:
            if arrival.record.key == user.encode():
                snapshot = decode(arrival.record.value or b"")
                if not isinstance(snapshot, SnapshotPromoted) or snapshot.reason != "idle":
                    raise AssertionError(f"expected an idle snapshot, got {snapshot!r}")
                seen.setdefault(snapshot.session_id, arrival.seen_at)
        return len(seen) >= idle.sessions

    await tail.wait_until(
        all_promoted,
        timeout=idle.timeout + idle.check_interval + 60,
        what="idle promotion of every session",
    )
    return {
        "timeout": idle.timeout,
        "check_interval": idle.check_interval,
        "latencies": [seen[session] - last_turn[session] for session in sorted(last_turn)],
    }


# ---- the suite ---------------------------------------------------------------------------------


SHORT_IDLE = IdleSetting(timeout=3.0, check_interval=0.5, sessions=4)
"""The throughput rounds' workers, measured for idle latency once their turns are promoted."""
DEFAULT_CHECK_IDLE = IdleSetting(timeout=10.0, check_interval=5.0, sessions=8)
"""Full profile: a worker of its own, with the default check interval (5 s)."""


def run(context: BenchContext) -> SuiteResult:
    turns, rounds = (300, 1) if context.quick else (3000, 4)
    figures: list[Figure] = []
    raw: dict[str, Any] = {
        "turns": turns,
        "rounds": rounds,
        "max_messages": MAX_MESSAGES,
        "concurrent_sessions": CONCURRENT_SESSIONS,
    }
    for kind in context.brokers:
        broker = context.broker(kind)
        bootstrap = broker.bootstrap_servers
        log_dir = context.workdir / "window-logs" / kind
        sides = asyncio.run(
            throughput(bootstrap, kind, turns, rounds, log_dir, SHORT_IDLE, broker.pid)
        )
        idle = [
            {
                **SHORT_IDLE.describe(),
                "latencies": [x for r in sides["memstream"] for x in r["idle"]["latencies"]],
            }
        ]
        if not context.quick:
            alone = asyncio.run(window_round(bootstrap, kind, [], log_dir, DEFAULT_CHECK_IDLE))
            idle.append({**DEFAULT_CHECK_IDLE.describe(), **alone["idle"]})
        raw[kind] = {"throughput": sides, "idle": idle}
        figures.append(
            Figure(
                "window",
                kind,
                "turns/s",
                median([r["turns_per_s"] for r in sides["memstream"]]),
                median([r["turns_per_s"] for r in sides["baseline"]]),
                "bare aiokafka consume→produce→commit loop, same records",
                Aim(">=", 0.5),
            )
        )
        cpu = {side: cpu_per_thousand(sides[side], turns) for side in sides}
        if cpu["memstream"] is not None and cpu["baseline"] is not None:
            figures.append(
                Figure(
                    "window CPU",
                    kind,
                    "CPU s per 1000 turns",
                    cpu["memstream"],
                    cpu["baseline"],
                    "the bare loop's process",
                    note="the worker's CPU (the broker's is in the raw JSON)",
                )
            )
        for result in idle:
            latencies = result["latencies"]
            for name, value in (("median", median(latencies)), ("slowest", max(latencies))):
                figures.append(
                    Figure(
                        "idle promotion latency",
                        f"{kind}, {result['label']}",
                        "s",
                        value,
                        result["timeout"],
                        "the configured idle_timeout",
                        Aim("<=", 1.5),
                        f"{name} of {len(latencies)} sessions",
                    )
                )
    return SuiteResult(figures, raw)


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["window", *sys.argv[1:]]))
