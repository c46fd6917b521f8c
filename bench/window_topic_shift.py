"""What the topic-shift trigger costs the window: turns/s with it on (the packaged local
embedder runs in the window stage, one call per batch of turns) over turns/s with it off.

    python -m bench.window_topic_shift [--turns 3000] [--rounds 3] [--broker tansu|apache]

The window suite's round (`bench.suites.window.window_round`: one `memstream worker --stage
window` over the same pre-produced turns, timed from its ready marker until every turn arrived
in a snapshot), with `MEMSTREAM_TOPIC_SHIFT_THRESHOLD` set on one side only, alternating which
side runs first. Every turn says the same words, so no turn leaves its topic and both sides
promote the same snapshots by count: the difference is the embedding and the comparison. The
raw result goes to `bench/results/window_topic_shift-DATE.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.core import alternate, median
from bench.machine import machine
from bench.suites.window import MAX_MESSAGES, SHORT_IDLE, session_turns, window_round
from events.codec import encode
from memstream.runtime.servers import ApacheKafkaBroker, TansuBroker

ROOT = Path(__file__).resolve().parents[1]
TOPIC_SHIFT_ON = {"MEMSTREAM_TOPIC_SHIFT_THRESHOLD": "0.2"}


async def rounds_of(
    bootstrap: str, kind: str, broker_pid: int | None, turns: int, rounds: int, logs: Path
) -> dict[str, list[dict[str, Any]]]:
    records = session_turns(turns, MAX_MESSAGES, datetime.now(UTC))
    payloads = [(record.key.encode(), encode(record)) for record in records]
    sides: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    for _, off_first in alternate(rounds):
        for side in ("off", "on") if off_first else ("on", "off"):
            extra = TOPIC_SHIFT_ON if side == "on" else {}
            result = await window_round(
                bootstrap, kind, payloads, logs, SHORT_IDLE, broker_pid, **extra
            )
            result.pop("idle", None)
            sides[side].append(result)
            shown = {k: round(v, 3) for k, v in result.items() if isinstance(v, float)}
            print(f"   topic shift {side}: {shown}", file=sys.stderr, flush=True)
    return sides


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--broker", choices=("tansu", "apache"), default="tansu")
    today = datetime.now(UTC).date().isoformat()
    default = ROOT / "bench" / "results" / f"window_topic_shift-{today}.json"
    parser.add_argument("--out", type=Path, default=default)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memstream-bench-") as scratch:
        folder = Path(scratch)
        server = TansuBroker(folder / "b") if args.broker == "tansu" else ApacheKafkaBroker(folder)
        with server as broker:
            sides = asyncio.run(
                rounds_of(
                    broker.bootstrap_servers,
                    args.broker,
                    broker.pid,
                    args.turns,
                    args.rounds,
                    folder / "logs",
                )
            )
    on = median([r["turns_per_s"] for r in sides["on"]])
    off = median([r["turns_per_s"] for r in sides["off"]])
    report = {
        "command": "python -m bench.window_topic_shift " + " ".join(argv or sys.argv[1:]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "broker": args.broker,
        "turns": args.turns,
        "rounds": args.rounds,
        "turns_per_s": {"on": on, "off": off},
        "on_over_off": round(on / off, 3),
        "sides": sides,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"window turns/s: topic shift on {on:,.0f}, off {off:,.0f} ({on / off:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
