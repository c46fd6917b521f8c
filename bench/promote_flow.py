"""The whole re-extraction flow with the packaged models, as a user runs it: a deployment extracting
live with the 0.5B model, its past re-extracted by the 1.5B one into a shadow, compared, promoted,
a new session extracted by the promoted extractor, and promoted back.

    python -m bench.promote_flow [--out bench/promote_flow.json]

Runs `memstream up` (the durable default) in a temporary data directory with this configuration:

    extractor: small
    extractors:
      small: {local_model: small}
      large: {local_model: large}

records the demo's two sessions (`memstream.cli.demo.DEMO_SESSIONS`, one after the other, each
waited for), then runs the commands the README shows and keeps what each printed. The
re-extraction rate is measured against the live extraction of the same snapshots in the same run:
`reextract --extractor small` (the live extractor again, into a second shadow) beside the live
extraction's own seconds (from each session's flush to its snapshot extracted, summed). Writes
the outputs, the figures and the machine to `--out`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.machine import machine

CONFIG = """\
extractor: small
extractors:
  small: {local_model: small}
  large: {local_model: large}
"""
EXPORT = re.compile(r"export (KAFKA_BOOTSTRAP_SERVERS|MONGODB_URI)=(\S+)")
NEW_SESSION = [
    {"role": "user", "content": "I started learning Portuguese, twice a week in the evenings."},
    {"role": "assistant", "content": "Boa sorte! How is it going?"},
    {"role": "user", "content": "Slowly. My teacher is called Ana."},
]
TIMEOUT = 1800.0


def user_environment() -> dict[str, str]:
    """This process's environment without memstream's own settings (an LLM endpoint, a broker,
    a database, any `MEMSTREAM_*`): a fresh user's shell, whatever ran the benchmark."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OPENAI_", "MEMSTREAM_", "KAFKA_", "MONGODB_"))
    }


def start_up(
    environment: dict[str, str], log: Path, *options: str
) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """`memstream up OPTIONS`, once it printed its exports (every stage ready)."""
    with log.open("ab") as errors:
        up = subprocess.Popen(
            [sys.executable, "-m", "memstream", "up", *options],
            stdout=subprocess.PIPE,
            stderr=errors,
            env=environment,
        )
    assert up.stdout is not None
    exports: dict[str, str] = {}
    while len(exports) < 2:
        line = up.stdout.readline().decode()
        if not line and up.poll() is not None:
            raise RuntimeError(f"memstream up exited:\n{log.read_text()[-3000:]}")
        if found := EXPORT.search(line):
            exports[found.group(1)] = found.group(2)
    return up, exports


def memstream(environment: dict[str, str], *arguments: str) -> dict[str, Any]:
    """Run `memstream ARGUMENTS`; what it printed, its exit code and seconds."""
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "memstream", *arguments],
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    seconds = round(time.monotonic() - started, 1)
    print(f"$ memstream {' '.join(arguments)}  ({seconds}s, exit {run.returncode})", flush=True)
    print(run.stdout, flush=True)
    if run.returncode not in (0, 1):
        raise RuntimeError(f"memstream {arguments} failed:\n{run.stderr[-3000:]}")
    return {
        "command": "memstream " + " ".join(arguments),
        "exit": run.returncode,
        "seconds": seconds,
        "stdout": run.stdout,
    }


def record_and_wait(environment: dict[str, str], session_id: str, messages: list[Any]) -> float:
    """Record one session of the demo user, flush it, and wait until every enabled type
    extracted its snapshot; the seconds from the flush to that."""
    from memstream.cli.demo import record_session
    from memstream.config import load_settings

    asyncio.run(record_session(load_settings(environ=environment), session_id, messages))
    return extracted(environment, session_id)


def extracted(environment: dict[str, str], session_id: str) -> float:
    """Wait until the served read model shows the session's snapshot extracted; the seconds."""
    from memstream.cli.demo import wait_for_extraction
    from memstream.config import load_settings

    started = time.monotonic()
    wait_for_extraction(load_settings(environ=environment), session_id, TIMEOUT)
    return round(time.monotonic() - started, 1)


def who_made(uri: str, databases: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each read model's current memories: session, type, text, and the extractor and model
    that made them (their provenance)."""
    from pymongo import MongoClient

    client: MongoClient[dict[str, Any]] = MongoClient(uri, tz_aware=True)
    try:
        return {
            name: [
                {
                    "session": m["evidence"][0]["session_id"],
                    "type": m["memory_type"],
                    "text": m["text"],
                    "extractor": m["provenance"]["extractor"],
                    "llm_model": m["provenance"]["llm_model"],
                }
                for m in client[name]["memories"]
                .find({"status": "current"})
                .sort([("memory_type", 1), ("text", 1)])
            ]
            for name in databases
        }
    finally:
        client.close()


def wait_for_log(log: Path, text: str, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{text!r} not in {log} after {timeout:.0f}s")
        time.sleep(1)


def wait_for_stages(data_dir: Path, timeout: float = 600.0) -> None:
    """Until every stage `up` supervises is up again (its `up.json`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = json.loads((data_dir / "up.json").read_text())
        state = record.get("supervision") or {}
        if state and all(member["up"] for member in state.values()):
            return
        time.sleep(1)
    raise RuntimeError("the stages did not come back")


def flow(scratch: Path) -> dict[str, Any]:
    config = scratch / "project-config.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    data_dir = scratch / "data"
    log = scratch / "up.log"
    environment = user_environment()
    environment |= {"MEMSTREAM_CONFIG": str(config), "MEMSTREAM_DATA_DIR": str(data_dir)}
    up, exports = start_up(environment, log)
    environment |= exports
    steps: list[dict[str, Any]] = []
    try:
        from memstream.cli.demo import DEMO_SESSIONS, DEMO_USER

        live_seconds = [record_and_wait(environment, sid, msgs) for sid, msgs in DEMO_SESSIONS]
        steps.append(memstream(environment, "memories", "--user", DEMO_USER))
        again = memstream(
            environment, "reextract", "--extractor", "small", "--into", "demo_small", "--json"
        )
        steps.append(
            memstream(environment, "reextract", "--extractor", "large", "--into", "demo_large")
        )
        large = memstream(
            environment, "reextract", "--extractor", "large", "--into", "demo_large", "--json"
        )
        steps.append(memstream(environment, "compare", "memstream", "demo_large"))
        steps.append(memstream(environment, "promote", "demo_large", "--reason", "the 1.5B model"))
        wait_for_log(log, "the local LLM is now")
        wait_for_stages(data_dir)
        promoted_seconds = record_and_wait(environment, "demo-session-3", NEW_SESSION)
        steps.append(memstream(environment, "memories", "--user", DEMO_USER))
        steps.append(memstream(environment, "promote", "--back"))
        wait_for_stages(data_dir)
        back_seconds = extracted(environment, "demo-session-3")  # the live lineage caught up
        steps.append(memstream(environment, "memories", "--user", DEMO_USER))
        made_by = who_made(environment["MONGODB_URI"], ["memstream", "demo_large", "demo_small"])
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(180)
    same = json.loads(again["stdout"])
    snapshots = len(DEMO_SESSIONS)
    return {
        "steps": steps,
        "live_extraction_seconds": live_seconds,
        "reextraction_same_extractor": same,
        "reextraction_large": json.loads(large["stdout"]),
        "rate": {
            "live_snapshots_per_second": round(snapshots / sum(live_seconds), 4),
            "reextract_snapshots_per_second": round(snapshots / same["seconds"], 4),
            "reextract_over_live": round(sum(live_seconds) / same["seconds"], 3),
        },
        "current_memories_made_by": made_by,
        "promoted_session_seconds": promoted_seconds,
        "back_catch_up_seconds": back_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("bench/promote_flow.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="promote-flow-") as scratch:
        result = flow(Path(scratch))
    result["machine"] = machine()
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result["rate"], indent=2))


if __name__ == "__main__":
    main()
