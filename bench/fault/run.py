"""The long fault-injection profile: thousands of turns, SIGKILLs, outages, malformed input.

    python -m bench.fault.run --broker apache --name long

starts its own broker (Apache Kafka: the durable one, restarted mid-run; or Tansu, which is
not restarted) and SecantusDB, runs the real pipeline with the scripted LLM, plays a seeded
schedule of faults while producing, and writes what the oracle found (docs/architecture.md,
"Fault injection") to bench/fault/results/<name>.json. Exit status 1 if anything was lost,
doubled or wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.machine import machine
from memstream.runtime.servers import ApacheKafkaBroker, SecantusServer, TansuBroker
from tests.support.fault import faults
from tests.support.fault import malformed as bad
from tests.support.fault.run import run_faults
from tests.support.fault.workload import generate

RESULTS = Path(__file__).parent / "results"


def schedule(
    rng: random.Random, kills: int, *, broker_restart: bool, workers_per_stage: int = 1
) -> list[faults.Fault]:
    """`kills` SIGKILLs (random stages, two at the extraction fault point, two at the
    projector's, one of a worker whose stage has a second one), the database and (durable
    broker) the broker restarted, the LLM failing, refusing, slow and garbling; seeded order.
    With several workers per stage, the random kills hit any worker, and a worker is added to
    a memory type's stage and one removed (rebalances under load)."""
    if workers_per_stage > 1:
        chosen: list[faults.Fault] = [faults.kill_any_worker() for _ in range(kills - 5)]
        chosen += [faults.add_worker("extract:semantic"), faults.remove_worker()]
    else:
        chosen = [faults.kill_stage() for _ in range(kills - 5)]
    chosen += [faults.kill_after_result_sent(), faults.kill_after_result_sent()]
    chosen += [faults.kill_after_projecting_a_result(), faults.kill_after_projecting_a_result()]
    chosen += [
        faults.second_worker_then_kill(),
        faults.database_outage(15),
        faults.llm_outage(15, "500"),
        faults.llm_outage(10, "refused"),
        faults.llm_slow(15),
        faults.llm_garbage(15),
    ]
    if broker_restart:
        chosen.append(faults.broker_restart(10))
    rng.shuffle(chosen)
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", choices=("apache", "tansu"), default="apache")
    parser.add_argument("--name", default="long")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--users", type=int, default=120)
    parser.add_argument("--sessions", type=int, default=6, help="sessions per user")
    parser.add_argument("--kills", type=int, default=16)
    parser.add_argument("--malformed", type=int, default=250)
    parser.add_argument("--produce-seconds", type=float, default=600.0)
    parser.add_argument("--settle-timeout", type=float, default=1200.0)
    parser.add_argument(
        "--workers-per-stage",
        type=int,
        default=1,
        help="workers of each busy stage (2: kills of any worker, one added, one removed)",
    )
    parser.add_argument(
        "--keep-logs",
        type=Path,
        default=None,
        help="run in this folder and keep it (workers', broker's and database's logs)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")

    workload = generate(
        args.seed, users=args.users, sessions_per_user=args.sessions, garbled_sessions=3
    )
    malformed = bad.generate(args.seed, args.malformed)
    rng = random.Random(args.seed)
    chosen = schedule(
        rng,
        args.kills,
        broker_restart=args.broker == "apache",
        workers_per_stage=args.workers_per_stage,
    )
    started = time.monotonic()
    with contextlib.ExitStack() as scratch:
        if args.keep_logs is None:
            work = Path(
                scratch.enter_context(tempfile.TemporaryDirectory(prefix="memstream-fault-"))
            )
        else:
            work = args.keep_logs
            work.mkdir(parents=True, exist_ok=True)
        broker: Any = (ApacheKafkaBroker if args.broker == "apache" else TansuBroker)(
            work / "broker"
        )
        broker.flavour = args.broker
        with broker, SecantusServer(work / "db") as database:
            outcome = run_faults(
                broker=broker,
                mongo_uri=database.uri,
                log_dir=work,
                seed=args.seed,
                workload=workload,
                malformed=malformed,
                faults=chosen,
                produce_seconds=args.produce_seconds,
                settle_timeout=args.settle_timeout,
                database=database,
                own_broker=args.broker == "apache",
                workers_per_stage=args.workers_per_stage,
            )
    result = {
        "name": args.name,
        "broker": args.broker,
        "seed": args.seed,
        "users": args.users,
        "workers_per_stage": args.workers_per_stage,
        "sessions": len(workload.sessions),
        "turns": workload.turn_count,
        "malformed_inputs_tried": len(malformed),
        **outcome.summary(),
        "wall_seconds": round(time.monotonic() - started, 1),
        "faults": outcome.faults,
        "unplanned_crash_details": outcome.crashes,
        "problems": {
            "lost": outcome.verdict.lost[:50],
            "duplicated": outcome.verdict.duplicated[:50],
            "wrong": outcome.verdict.wrong[:50],
        },
        "machine": machine(),
        "command": "python -m bench.fault.run " + " ".join(argv or sys.argv[1:]),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{args.name}.json"
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("faults",)}, indent=2))
    print(f"written to {path}")
    return 0 if outcome.verdict.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
