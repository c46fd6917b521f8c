"""Which pipeline stage is slowest: each stage's throughput on a backlog, and a profile of one.

    python -m bench.profile_stages [--broker tansu] [--users 60] [--sessions 6]
        [--code before=/tmp/memstream-before --code after=.] [--rounds 2]
        [--profile projector] [--out bench/results/profile-2026-11-30.json]

Starts its own broker (Tansu by default) and SecantusDB, and a scripted LLM (so the LLM's own
time is not what is measured) answering for a seeded workload of the fault harness
(`tests.support.fault.workload`: users stating likings and moves, every session flushed; the
window's idle timeout is an hour, so only flushes and full windows promote). Each round
pre-produces the workload's turns on fresh topics, then starts the stages **one at a time** —
window, extract:semantic, :episodic, :procedural, :taxonomic, projector (all four types
enabled) — each on the complete backlog its upstream stages left, and samples its consumer
group's lag until it is zero (`bench.stage_drain`). A stage's throughput is its input records
over the time from its worker being ready to the lag reaching zero.

`--code NAME=DIR` runs the stage workers from another source tree (e.g. a `git archive` of an
earlier commit): with several, each round runs every build, alternating which goes first.
`--startup-only REPS` only times building the window's and the projector's apps (imports
included) from each build.
`--profile STAGE` instead runs one round with that stage's worker under `py-spy record --idle`
(all threads, wall time) and writes the profile's summary beside the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import pyspy_summary
from bench.core import alternate, median
from bench.machine import machine
from bench.stage_drain import Drain, LagProbe, measure_drain
from events.codec import encode
from events.memories import MEMORY_TYPES
from events.turns import SessionFlushRequested, TurnRecorded
from memstream.runtime.pipeline import StageProcess, pipeline_stages
from memstream.runtime.servers import ApacheKafkaBroker, SecantusServer, TansuBroker
from memstream.runtime.topics import ensure_topics
from tests.support.extraction_requests import EMPTY_ANSWERS, asked
from tests.support.fault.llm import WorkloadLLM
from tests.support.fault.workload import Workload, generate, reconcile_environment
from tests.support.pipeline import PipelineHarness
from tests.support.scripted_llm import ScriptedLLM

PROFILE_RATE = 50
"""py-spy samples per second and thread."""
OURS = ("events/", "handlers/", "streams/", "projections/", "memstream/")
"""Paths of our code in a profile's frames."""


def stage_inputs(harness: PipelineHarness, stage: str) -> list[str]:
    topics = harness.settings.kafka.topics
    if stage == "window":
        return [topics.turns]
    if stage.startswith("extract:"):
        return [topics.snapshots]
    return [topics.turns, topics.snapshots, topics.memories, topics.dead_letters]


def stage_group(harness: PipelineHarness, stage: str) -> str:
    return harness.settings.kafka.group_prefix + stage.replace(":", "-")


def records_of(workload: Workload, seed: int) -> list[tuple[bytes, bytes]]:
    """The workload as a producer would send it: sessions interleaved (eight at a time, each in
    its own order), a flush after each session's last turn."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    sessions = list(workload.sessions)
    pending = [list(session.turns) for session in sessions]
    waiting = list(range(len(sessions)))
    rng.shuffle(waiting)
    active: list[int] = []
    records: list[tuple[bytes, bytes]] = []
    while waiting or active:
        while waiting and len(active) < 8:
            active.append(waiting.pop())
        index = rng.choice(active)
        session = sessions[index]
        turn = pending[index].pop(0)
        event = TurnRecorded(
            event_id=turn.turn_id,
            occurred_at=now,
            recorded_at=now,
            role=turn.role,  # type: ignore[arg-type]
            content=turn.content,
            user_id=session.user_id,
            session_id=session.session_id,
        )
        records.append((session.key, encode(event)))
        if not pending[index]:
            active.remove(index)
            flush = SessionFlushRequested(
                event_id=f"flush-{turn.turn_id}",
                occurred_at=now,
                user_id=session.user_id,
                session_id=session.session_id,
            )
            records.append((session.key, encode(flush)))
    return records


async def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    """One record per batch (exact end offsets on Tansu), all in flight at once."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", max_batch_size=1)
    await producer.start()
    try:
        futures = [await producer.send(topic, value, key=key) for key, value in records]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def pyspy_command(stage: str, output: Path) -> list[str]:
    binary = Path(sys.executable).parent / "py-spy"
    return [
        str(binary) if binary.is_file() else "py-spy",
        *(
            "record",
            "--format",
            "raw",
            "--idle",
            "--threads",
            "--rate",
            str(PROFILE_RATE),
            "-o",
            str(output),
        ),
        *("--", sys.executable, "-m", "memstream", "worker", "--stage", stage),
    ]


def stop_profiled(process: StageProcess) -> None:
    """Stop py-spy (SIGINT: it writes its profile) and then the worker it started."""
    pid = process.pid
    children: list[int] = []
    if pid is not None:
        children_file = Path(f"/proc/{pid}/task/{pid}/children")
        if children_file.exists():
            children = [int(c) for c in children_file.read_text().split()]
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + 30
        while process.running and time.monotonic() < deadline:
            time.sleep(0.2)
    for child in children:  # the worker py-spy started (ours, by its id)
        try:
            os.kill(child, signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + 20
        while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if Path(f"/proc/{child}").exists():
            os.kill(child, signal.SIGKILL)
    process.stop()


def run_round(
    *,
    broker: Any,
    mongo_uri: str,
    llm: ScriptedLLM,
    workload: Workload,
    code: Path,
    log_dir: Path,
    profile: str | None = None,
    profile_output: Path | None = None,
) -> dict[str, Any]:
    """Produce the backlog on fresh topics, drain it stage by stage; the drains and the read
    model's counts."""
    run = uuid.uuid4().hex[:10]
    environment = {
        "PYTHONPATH": str(code),
        "MEMSTREAM_ENABLED_EXTRACTIONS": ",".join(MEMORY_TYPES),
        "MEMSTREAM_IDLE_TIMEOUT": "3600",
        **reconcile_environment(),
    }
    harness = PipelineHarness(
        broker=broker,
        mongo_uri=mongo_uri,
        llm=llm,
        run_id=run,
        log_dir=log_dir / f"logs-{run}",
        environment=environment,
    )
    kafka = harness.settings.kafka
    asyncio.run(ensure_topics(kafka))
    records = records_of(workload, workload.seed)
    produced = time.monotonic()
    asyncio.run(produce(kafka.bootstrap_servers or "", kafka.topics.turns, records))
    produce_seconds = time.monotonic() - produced
    drains: list[Drain] = []
    try:
        for stage in pipeline_stages(harness.settings):
            process = harness.pipeline.processes[stage]
            profiled = stage == profile and profile_output is not None
            if profiled:
                assert profile_output is not None
                process = StageProcess(
                    stage,
                    harness.environment,
                    harness.log_dir,
                    pyspy_command(stage, profile_output),
                    log_name="worker-profiled.log",
                )
            drains.append(asyncio.run(drain(harness, stage, process)))
            stop_profiled(process) if profiled else process.stop()
            shown = {k: v for k, v in drains[-1].to_json().items() if k != "lag"}
            print(f"   {shown}", file=sys.stderr, flush=True)
        counts = {
            name: harness.db[name].count_documents({})
            for name in ("turns", "snapshots", "memories", "memory_events", "profiles")
        }
    finally:
        harness.stop()
    return {
        "run": run,
        "records_produced": len(records),
        "produce_seconds": round(produce_seconds, 2),
        "stages": [d.to_json() for d in drains],
        "read_model": counts,
    }


async def drain(harness: PipelineHarness, stage: str, process: StageProcess) -> Drain:
    kafka = harness.settings.kafka
    probe = LagProbe(
        kafka.bootstrap_servers or "",
        stage_group(harness, stage),
        stage_inputs(harness, stage),
        kafka.partitions,
    )
    async with probe:
        started = time.monotonic()
        process.start()
        return await measure_drain(
            stage,
            probe,
            started=started,
            is_ready=process.is_ready,
            alive=lambda: process.running,
        )


def install_answers(llm: ScriptedLLM, workload: Workload) -> None:
    """Semantic facts for the workload (`WorkloadLLM`); the other types find nothing."""
    WorkloadLLM(workload).install(llm)
    for memory_type in MEMORY_TYPES:
        llm.on(asked(memory_type, ""), EMPTY_ANSWERS[memory_type])


def summarize(rounds: list[dict[str, Any]], builds: list[str]) -> dict[str, Any]:
    """Medians of every stage's drain time and records/s for every build; with two builds, the
    ratios of the second over the first (records/s: above 1 is faster). The slowest stage is
    the one that takes longest to work through the same backlog."""
    seconds: dict[str, dict[str, list[float]]] = {}
    rates: dict[str, dict[str, list[float]]] = {}
    ready: dict[str, dict[str, list[float]]] = {}
    for entry in rounds:
        for stage in entry["stages"]:
            for table, key in ((seconds, "drain_seconds"), (rates, "records_per_second")):
                table.setdefault(stage["stage"], {}).setdefault(entry["build"], []).append(
                    stage[key]
                )
            ready.setdefault(stage["stage"], {}).setdefault(entry["build"], []).append(
                stage["ready_seconds"]
            )

    def medians(table: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
        return {
            stage: {build: round(median(values), 2) for build, values in per_build.items()}
            for stage, per_build in table.items()
        }

    summary: dict[str, Any] = {
        "drain_seconds": medians(seconds),
        "records_per_second": medians(rates),
        "ready_seconds": medians(ready),
    }
    if len(builds) == 2:
        first, second = builds
        for name in ("records_per_second", "ready_seconds"):
            summary[f"ratio_{name}"] = {
                stage: round(row[second] / row[first], 2)
                for stage, row in summary[name].items()
                if row.get(first) and second in row
            }
    drains = summary["drain_seconds"]
    summary["slowest_stage"] = {
        build: max(drains, key=lambda stage: drains[stage].get(build, 0.0)) for build in builds
    }
    return summary


STARTUP_CODE = """import os
from memstream.config import load_settings
from memstream.runtime.worker import build_stage
build_stage(load_settings(environ=dict(os.environ)), os.environ["STAGE"])"""
"""What a stage worker does before it joins its group: imports, settings, the app."""


def startup_times(builds: dict[str, Path], stages: list[str], reps: int) -> dict[str, Any]:
    """Seconds for a fresh interpreter to build each stage's app from each build (no servers
    needed), alternating which build goes first; medians and, with two builds, the ratio of the
    second over the first."""
    environment = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9",
        "MONGODB_URI": "mongodb://127.0.0.1:9",
        "MEMSTREAM_CONFIG": "/dev/null",
    }
    result: dict[str, Any] = {}
    for stage in stages:
        seconds: dict[str, list[float]] = {name: [] for name in builds}
        for _, forward in alternate(reps):
            for name in list(builds) if forward else list(reversed(builds)):
                env = {**environment, "PYTHONPATH": str(builds[name]), "STAGE": stage}
                started = time.perf_counter()
                subprocess.run([sys.executable, "-c", STARTUP_CODE], env=env, check=True)
                seconds[name].append(round(time.perf_counter() - started, 3))
        medians = {name: median(values) for name, values in seconds.items()}
        result[stage] = {"seconds": seconds, "median": medians}
        if len(builds) == 2:
            first, second = builds
            result[stage]["ratio"] = round(medians[second] / medians[first], 2)
    return result


def parse_code(values: list[str]) -> dict[str, Path]:
    """`NAME=DIR` pairs (default: this source tree as `current`)."""
    if not values:
        return {"current": Path.cwd()}
    builds: dict[str, Path] = {}
    for value in values:
        name, _, directory = value.partition("=")
        if not name or not directory:
            raise SystemExit(f"--code wants NAME=DIR, not {value!r}")
        builds[name] = Path(directory).resolve()
    return builds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--broker", choices=("tansu", "apache"), default="tansu")
    parser.add_argument("--users", type=int, default=60)
    parser.add_argument("--sessions", type=int, default=6, help="sessions per user")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--code", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--profile", choices=pipeline_stages_names(), default=None)
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here")
    parser.add_argument(
        "--startup-only",
        type=int,
        default=0,
        metavar="REPS",
        help="only time building each stage's app from each build, REPS times (no servers)",
    )
    args = parser.parse_args(argv)
    builds = parse_code(args.code)
    workload = generate(
        args.seed, users=args.users, sessions_per_user=args.sessions, garbled_sessions=0,
        idle_share=0.0,
    )  # fmt: skip
    result: dict[str, Any] = {
        "command": "python -m bench.profile_stages " + " ".join(argv or sys.argv[1:]),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "broker": args.broker,
        "workload": {
            "seed": args.seed,
            "users": args.users,
            "sessions": len(workload.sessions),
            "turns": workload.turn_count,
        },
        "builds": {name: str(path) for name, path in builds.items()},
    }
    if args.startup_only:
        # the extractors' apps need a live LLM endpoint to build (the embedder's dimension)
        result["startup"] = startup_times(builds, ["window", "projector"], args.startup_only)
        text = json.dumps(result, indent=2)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
        print(text)
        return 0
    rounds: list[dict[str, Any]] = []
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memstream-prof-")))
        broker: Any = (TansuBroker if args.broker == "tansu" else ApacheKafkaBroker)(
            work / "broker"
        )
        broker.flavour = args.broker
        stack.enter_context(broker)
        database = stack.enter_context(SecantusServer(work / "db"))
        llm = stack.enter_context(ScriptedLLM())
        install_answers(llm, workload)
        names = list(builds)
        if args.profile:
            name = names[-1]
            output = work / "profile.raw"
            entry = run_round(
                broker=broker, mongo_uri=database.uri, llm=llm, workload=workload,
                code=builds[name], log_dir=work, profile=args.profile, profile_output=output,
            )  # fmt: skip
            rounds.append({"build": name, "round": 0, "profiled": args.profile, **entry})
            text = pyspy_summary.render(
                pyspy_summary.parse(output.read_text().splitlines()),
                title=f"py-spy --idle --threads, stage {args.profile}, build {name}",
                rate=PROFILE_RATE,
                ours=OURS,
            )
            if args.out is not None:  # the collapsed stacks, for flame graphs
                args.out.with_suffix(".raw.txt").write_text(output.read_text())
            result["profile_summary"] = text
            print(text)
        else:
            for index, first_is_first in alternate(args.rounds):
                order = names if first_is_first else list(reversed(names))
                for name in order:
                    print(f"── round {index}, build {name}", file=sys.stderr, flush=True)
                    entry = run_round(
                        broker=broker, mongo_uri=database.uri, llm=llm, workload=workload,
                        code=builds[name], log_dir=work,
                    )  # fmt: skip
                    rounds.append({"build": name, "round": index, **entry})
    result["rounds"] = rounds
    result["summary"] = summarize(rounds, list(builds))
    text = json.dumps(result, indent=2)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
        if "profile_summary" in result:
            args.out.with_suffix(".txt").write_text(result["profile_summary"] + "\n")
    print(json.dumps(result["summary"], indent=2))
    return 0


def pipeline_stages_names() -> list[str]:
    return ["window", *(f"extract:{kind}" for kind in MEMORY_TYPES), "projector"]


if __name__ == "__main__":
    raise SystemExit(main())
