"""Soak: `memstream up` with the packaged 0.5B model through hundreds of LLM calls, one LLM kill.

    .venv/bin/python bench/soak.py [--calls 300] [--ephemeral] [--out bench/results/soak-DATE.json]

Runs ``memstream up`` (the durable embedded Apache Kafka and SecantusDB, or Tansu with
``--ephemeral``) with no LLM endpoint configured, so `up` starts and supervises the packaged
local model (``MEMSTREAM_LOCAL_LLM=small``: the 0.5B, for time), and the local embedder. It
feeds short two-turn sessions through the SDK -- each flushed at once, a few in flight so the
LLM is never idle -- until the local LLM server has answered `--calls` chat completions (read
from its log). Each session's user turn states a fact, an event and a directive, so all four
memory types ask the model. Every process's RSS (`bench/rss.py`: the process with its
children) is sampled every `--interval` seconds, by name as `up` records its children in
``data_dir/up.json`` (so the restarted LLM server is followed under the same name).

Once half the calls are answered, the LLM server is SIGKILLed, in the middle of a request:
`up` must restart it on the same port, the stages must wait the outage out and go on. At the
end (every fed session extracted, or `--drain-timeout`), it checks from the read model:

* every session fed has exactly one snapshot, holding exactly the session's turns;
* every snapshot has a result for every enabled memory type (not lost); results that failed
  (the small model's invalid answers, after retries) are counted, and must not be outages;
* every memory event comes from the result that holds its snapshot's slot (no second answer
  mixed in), every memory's versions run 1..n with exactly one current (nothing doubled);
* `up` restarted the LLM server exactly once and never gave up.

Writes the RSS time series, each process's figures (start, after warm-up, end, peak), the LLM
calls over time and the checks to `--out` (rewritten while it runs, so an interrupted run
leaves its samples); exits 1 if a check failed. How long it takes depends on the machine: on 2
cores at load average 10-20 a warm call took about a minute (106 calls in 95 min,
bench/results/soak-2026-12-01.json), so 300 calls would take about 5 hours there; with nothing
else running a call took about 8 s (304 calls in 41 min, bench/results/soak-2026-12-02.json).
Bound a run with `--max-seconds`, and the report says whether the target was reached.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pymongo import MongoClient

from bench.llama_timings import llama_lock
from bench.machine import machine
from bench.rss import tree_rss
from memstream.config import Settings, load_settings
from memstream.runtime.servers.leftovers import RECORD_FILE
from memstream.sdk.client import MemoryClient

EXPORT = re.compile(r"export (KAFKA_BOOTSTRAP_SERVERS|MONGODB_URI)=(\S+)")
ANSWERED = re.compile(rb'"POST /v1/chat/completions HTTP/1\.1" 200')
LLM = "local-llm"

PLACES = ["Lisbon", "Porto", "Oslo", "Lyon", "Kyoto", "Quito", "Accra", "Perth", "Turin", "Cork"]
PETS = ["a cat", "two dogs", "a parrot", "a tortoise", "three fish", "a rabbit", "a hamster"]
STYLES = ["in Portuguese", "in bullet points", "briefly", "with examples", "in French"]


def session_messages(index: int) -> list[dict[str, str]]:
    """Session `index`: a fact, an event and a directive by the user, one assistant answer."""
    place, pet = PLACES[index % len(PLACES)], PETS[(index // 3) % len(PETS)]
    style = STYLES[(index // 7) % len(STYLES)]
    return [
        {
            "role": "user",
            "content": f"I moved to {place} last week and I have {pet}. "
            f"Please always answer me {style}.",
        },
        {"role": "assistant", "content": f"Welcome to {place}! I will answer {style}."},
    ]


@dataclass
class Fed:
    user_id: str
    session_id: str
    turn_ids: list[str]


@dataclass
class Soak:
    """What the run observed while it ran."""

    started: float = field(default_factory=time.monotonic)
    samples: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[float, int]] = field(default_factory=list)
    fed: list[Fed] = field(default_factory=list)
    kill: dict[str, Any] = field(default_factory=dict)
    out_of_time: bool = False

    def elapsed(self) -> float:
        return round(time.monotonic() - self.started, 1)


def children(data_dir: Path) -> dict[str, int]:
    """`up`'s children by name (a second child of one name gets a suffix), from up.json."""
    try:
        record = json.loads((data_dir / RECORD_FILE).read_text())
    except (OSError, ValueError):
        return {}
    named: dict[str, int] = {"up": int(record["pid"])}
    for pid, child in record.get("children", {}).items():
        name = str(child["name"])
        while name in named:
            name += "+"
        named[name] = int(pid)
    return named


def supervision(data_dir: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((data_dir / RECORD_FILE).read_text()).get("supervision") or {})
    except (OSError, ValueError):
        return {}


def answered_calls(log: Path) -> int:
    try:
        return len(ANSWERED.findall(log.read_bytes()))
    except OSError:
        return 0


def sample(soak: Soak, data_dir: Path) -> None:
    # `up` itself runs the SDK-less supervisor only; its children are counted apart
    rss = {
        name: tree_rss(pid) if name != "up" else _own_rss(pid)
        for name, pid in children(data_dir).items()
    }
    soak.samples.append({"t": soak.elapsed(), "rss_mb": {k: v for k, v in rss.items() if v}})


def _own_rss(pid: int) -> float | None:
    import psutil

    try:
        return float(psutil.Process(pid).memory_info().rss) / 1e6
    except psutil.Error:
        return None


async def feed(settings: Settings, index: int) -> Fed:
    user, session = f"soak-user-{index % 12}", f"soak-{index}"
    async with MemoryClient(settings) as client:
        turns = await client.record(user, session, session_messages(index))
        await client.flush(user, session)
    return Fed(user, session, [turn.event_id for turn in turns])


def extracted(db: Any, fed: Fed, types: tuple[str, ...]) -> bool:
    snapshot = db["snapshots"].find_one({"user_id": fed.user_id, "session_id": fed.session_id})
    done = (snapshot or {}).get("extractions") or {}
    return snapshot is not None and all(t in done for t in types)


def start_up(
    data_dir: Path, log: Path, ephemeral: bool
) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    config = data_dir.parent / "soak-config.yaml"
    config.write_text("# defaults and the environment\n")
    kept = ("MEMSTREAM_MODEL_CACHE", "MEMSTREAM_LLAMA_LOCK")  # where things are, not settings
    environment = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "MEMSTREAM_")) or k in kept
        },
        "MEMSTREAM_CONFIG": str(config),
        "MEMSTREAM_DATA_DIR": str(data_dir),
        "MEMSTREAM_LOCAL_LLM": "small",
    }
    for variable in ("KAFKA_BOOTSTRAP_SERVERS", "MONGODB_URI", "MONGODB_DATABASE"):
        environment.pop(variable, None)
    command = [sys.executable, "-m", "memstream", "up", *(["--ephemeral"] if ephemeral else [])]
    with log.open("ab") as output:
        up = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=output, env=environment)
    printed: dict[str, str] = {}
    assert up.stdout is not None
    deadline = time.monotonic() + 600
    while len(printed) < 2:
        line = up.stdout.readline().decode()
        if not line and up.poll() is not None:
            raise SystemExit(f"memstream up exited:\n{log.read_text()[-3000:]}")
        if match := EXPORT.search(line):
            printed[match[1]] = match[2]
        if time.monotonic() > deadline:
            up.kill()
            raise SystemExit("memstream up did not start within 600 s")
    return up, {**environment, **printed}


def kill_llm(soak: Soak, data_dir: Path) -> None:
    pid = children(data_dir).get(LLM)
    assert pid is not None, "no local LLM server recorded in up.json"
    os.kill(pid, signal.SIGKILL)
    soak.kill = {"t": soak.elapsed(), "pid": pid, "calls_before": soak.calls[-1][1]}
    print(f"[{soak.elapsed():7.1f}s] SIGKILLed the local LLM server (pid {pid})", flush=True)


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    data_dir = workdir / "data"
    up_log = workdir / "up.log"
    llm_log = data_dir / "logs" / "local-llm.log"
    soak = Soak()
    up, environment = start_up(data_dir, up_log, args.ephemeral)
    settings = load_settings(environ=environment)
    types = tuple(settings.memory.extraction.enabled)
    client: MongoClient[dict[str, Any]] = MongoClient(environment["MONGODB_URI"], tz_aware=True)
    db = client[settings.mongodb.database]
    print(f"[{soak.elapsed():7.1f}s] up is running; feeding sessions", flush=True)
    last_sample = 0.0
    drain_deadline: float | None = None
    try:
        while True:
            if up.poll() is not None:
                raise SystemExit(f"memstream up exited ({up.returncode}):\n{_tail(up_log)}")
            now = time.monotonic()
            if now - last_sample >= args.interval:
                last_sample = now
                sample(soak, data_dir)
                soak.calls.append((soak.elapsed(), answered_calls(llm_log)))
            calls = soak.calls[-1][1] if soak.calls else 0
            out_of_time = args.max_seconds is not None and soak.elapsed() > args.max_seconds
            half_time = args.max_seconds is not None and soak.elapsed() > args.max_seconds / 2
            if not soak.kill and (calls >= args.calls // 2 or half_time):
                kill_llm(soak, data_dir)
            if out_of_time and not soak.out_of_time:
                soak.out_of_time = True
                print(f"[{soak.elapsed():7.1f}s] out of time: draining", flush=True)
            feeding = calls < args.calls and not soak.out_of_time
            pending = [f for f in soak.fed[-args.in_flight * 2 :] if not extracted(db, f, types)]
            if feeding and len(pending) < args.in_flight:
                soak.fed.append(asyncio.run(feed(settings, len(soak.fed))))
                print(
                    f"[{soak.elapsed():7.1f}s] fed session {len(soak.fed)}, {calls} LLM calls",
                    flush=True,
                )
            if args.out and len(soak.samples) % 12 == 1:  # an interrupted run leaves its data
                args.out.write_text(json.dumps(partial(soak), indent=1) + "\n", encoding="utf-8")
            if not feeding:
                drain_deadline = drain_deadline or now + args.drain_timeout
                if all(extracted(db, f, types) for f in soak.fed) or now > drain_deadline:
                    break
            time.sleep(1.0)
        sample(soak, data_dir)
        soak.calls.append((soak.elapsed(), answered_calls(llm_log)))
        checks = check(db, soak, types, supervision(data_dir), _projector_log(data_dir))
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGINT)
            try:
                up.wait(120)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait()
    return report(soak, checks, args, types, up.returncode)


def partial(soak: Soak) -> dict[str, Any]:
    """What is measured so far (rewritten while the run goes on)."""
    return {
        "partial": True,
        "seconds": soak.elapsed(),
        "kill": soak.kill,
        "calls_over_time": soak.calls,
        "samples": soak.samples,
    }


def _projector_log(data_dir: Path) -> str:
    try:
        return (data_dir / "logs" / "worker-projector.log").read_text(errors="replace")
    except OSError:
        return ""


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def check(
    db: Any, soak: Soak, types: tuple[str, ...], supervised: dict[str, Any], projector_log: str
) -> dict[str, Any]:
    """The end-of-run checks (module docstring): each a list of what went wrong."""
    lost: list[str] = []
    doubled: list[str] = []
    wrong: list[str] = []
    failed: Counter[str] = Counter()
    claimed: set[str] = set()
    for fed in soak.fed:
        snapshots = list(
            db["snapshots"].find({"user_id": fed.user_id, "session_id": fed.session_id})
        )
        if not snapshots:
            lost.append(f"{fed.session_id}: no snapshot")
            continue
        if len(snapshots) > 1:
            doubled.append(f"{fed.session_id}: {len(snapshots)} snapshots")
        snapshot = snapshots[0]
        if list(snapshot.get("turn_ids") or []) != fed.turn_ids:
            wrong.append(f"{fed.session_id}: snapshot turns {snapshot.get('turn_ids')}")
        for memory_type in types:
            result = (snapshot.get("extractions") or {}).get(memory_type)
            if result is None:
                lost.append(f"{fed.session_id}: no {memory_type} result")
                continue
            claimed.update(result.get("decision_ids") or [])
            if result.get("failure"):
                failed[str(result["failure"]).split(":")[0][:80]] += 1
    users = {fed.user_id for fed in soak.fed}
    for event in db["memory_events"].find({"user_id": {"$in": sorted(users)}}, {"_id": 1}):
        if event["_id"] not in claimed:
            doubled.append(f"memory event {event['_id']} is from no result that stands")
    versions: defaultdict[str, list[Any]] = defaultdict(list)
    for memory in db["memories"].find({"user_id": {"$in": sorted(users)}}):
        versions[memory["memory_id"]].append(memory)
    for memory_id, docs in versions.items():
        numbers = sorted(int(d["version"]) for d in docs)
        current = [d for d in docs if d.get("status") == "current"]
        if numbers != list(range(1, len(docs) + 1)) or len(current) > 1:
            doubled.append(f"memory {memory_id}: versions {numbers}, {len(current)} current")
    outages = [reason for reason in failed if "Unavailable" in reason or "timed out" in reason]
    wrong += [f"an outage became a failed result: {reason}" for reason in outages]
    restarts = int((supervised.get(LLM) or {}).get("restarts", 0))
    if restarts != 1:
        wrong.append(f"the local LLM server was restarted {restarts} times, not once")
    return {
        "ok": not (lost or doubled or wrong),
        "lost": lost,
        "doubled": doubled,
        "wrong": wrong,
        "failed_results_by_reason": dict(failed),
        "dead_letters": db["dead_letters"].count_documents({}),
        "memories": len(versions),
        "memory_events": db["memory_events"].count_documents({"user_id": {"$in": sorted(users)}}),
        "later_results_ignored_by_the_projector": projector_log.count("ignored a later"),
        "llm_restarts": restarts,
        "supervision": supervised,
    }


def figures(
    samples: list[dict[str, Any]],
    calls: list[tuple[float, int]],
    warm_up_calls: int,
    kill: dict[str, Any],
) -> dict[str, dict[str, float]]:
    """Per process: RSS at the start, after warm-up (median of the 5 samples from when the LLM
    had answered `warm_up_calls`), at the end (median of the last 3), its peak, and its growth
    from after warm-up to the end. The LLM server's two lives are apart: ``local-llm`` ends at
    the kill; ``local-llm, restarted`` warms up again over `warm_up_calls` calls after it."""
    series: defaultdict[str, list[tuple[float, float]]] = defaultdict(list)
    for entry in samples:
        for name, value in entry["rss_mb"].items():
            if name == LLM and kill and entry["t"] > kill["t"]:
                name = f"{LLM}, restarted"
            series[name].append((entry["t"], value))
    warm_up = _when(calls, warm_up_calls)
    rewarm = _when(calls, kill.get("calls_before", 0) + warm_up_calls) if kill else None
    out: dict[str, dict[str, float]] = {}
    for name, points in series.items():
        since = rewarm if name.endswith("restarted") and rewarm is not None else warm_up
        warm = [v for t, v in points if t >= since][:5] or [points[-1][1]]
        after = statistics.median(warm)
        end = statistics.median(v for _, v in points[-3:])
        out[name] = {
            "start": points[0][1],
            "after_warm_up": after,
            "end": end,
            "peak": max(v for _, v in points),
            "growth_after_warm_up": end - after,
            "samples": len(points),
        }
    return out


def _when(calls: list[tuple[float, int]], count: int) -> float:
    """When the LLM had answered `count` calls (the last sample's time if never)."""
    return next((t for t, n in calls if n >= count), calls[-1][0] if calls else 0.0)


def rescore(path: Path, warm_up_calls: int) -> None:
    """Recompute a saved report's RSS figures from its samples (after a change of method)."""
    result = json.loads(path.read_text(encoding="utf-8"))
    calls = [(float(t), int(n)) for t, n in result["calls_over_time"]]
    result["rss_mb"] = figures(result["samples"], calls, warm_up_calls, result["kill"])
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


def report(
    soak: Soak,
    checks: dict[str, Any],
    args: argparse.Namespace,
    types: tuple[str, ...],
    up_exit: int | None,
) -> dict[str, Any]:
    calls = soak.calls[-1][1] if soak.calls else 0
    warm_up = _when(soak.calls, args.warm_up_calls)
    return {
        "setup": {
            "command": "bench/soak.py " + " ".join(sys.argv[1:]),
            "model": "qwen2.5-coder-0.5b-instruct-q4_k_m (MEMSTREAM_LOCAL_LLM=small)",
            "log": "tansu (ephemeral)" if args.ephemeral else "durable Apache Kafka",
            "enabled_types": list(types),
            "target_calls": args.calls,
            "in_flight_sessions": args.in_flight,
            "warm_up": f"until {args.warm_up_calls} LLM calls ({warm_up:.0f} s)",
            "machine": machine(),
            "started": args.started,
        },
        "seconds": soak.elapsed(),
        "llm_calls": calls,
        "target_reached": calls >= args.calls,
        "sessions": len(soak.fed),
        "kill": soak.kill,
        "up_exit_code": up_exit,
        "checks": checks,
        "rss_mb": figures(soak.samples, soak.calls, args.warm_up_calls, soak.kill),
        "calls_over_time": soak.calls,
        "samples": soak.samples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=300, help="LLM calls to reach")
    parser.add_argument("--ephemeral", action="store_true", help="Tansu in memory, not Kafka")
    parser.add_argument("--in-flight", type=int, default=3, help="sessions waiting at most")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--warm-up-calls", type=int, default=30)
    parser.add_argument("--drain-timeout", type=float, default=900.0)
    parser.add_argument(
        "--max-seconds",
        type=float,
        help="stop feeding after this long even short of --calls (the kill then comes at half "
        "of it at the latest); the report says whether the target was reached",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep the data and logs here (default: a temporary folder, removed at the end)",
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--rescore", type=Path, help="recompute the RSS figures of a saved report, run nothing"
    )
    args = parser.parse_args(argv)
    if args.rescore:
        rescore(args.rescore, args.warm_up_calls)
        return 0
    args.started = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    # Stop cleanly (stopping `up` too) on Ctrl-C or SIGTERM, even as a background job, which a
    # shell starts with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with llama_lock(), tempfile.TemporaryDirectory(prefix="memstream-soak-") as scratch:
        workdir = args.workdir or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        result = run(args, workdir)
    text = json.dumps(result, indent=1) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    rows = result["rss_mb"]
    print(f"{result['llm_calls']} LLM calls, {result['sessions']} sessions, {result['seconds']}s")
    for name, row in sorted(rows.items()):
        print(
            f"  {name:24} start {row['start']:7.0f}  after warm-up {row['after_warm_up']:7.0f}  "
            f"end {row['end']:7.0f}  peak {row['peak']:7.0f} MB"
        )
    checks = result["checks"]
    print(
        f"checks: {'ok' if checks['ok'] else 'FAILED'}; lost {len(checks['lost'])}, doubled "
        f"{len(checks['doubled'])}, wrong {len(checks['wrong'])}; failed results "
        f"{checks['failed_results_by_reason']}"
    )
    for name in ("lost", "doubled", "wrong"):
        for item in checks[name][:20]:
            print(f"  {name}: {item}")
    if not result["target_reached"]:
        print(f"target of {args.calls} LLM calls NOT reached (--max-seconds)")
    return 0 if checks["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
