"""Where a user's first search goes: SecantusDB's side of the find, under py-spy.

    python -m bench.search_first_profile [--size 10000] [--finds 3] \
        [--out bench/results/search-first-profile-DATE]

One SecantusDB (a Python server) holds `--size` synthetic current memories of one user, packed
as the projector stores them (the search suite's data: `bench.suites.search`). First the query
of an index build (`ReadModel._indexed_memories`) and the same query without its projection are
timed `--finds` times each, alternating, with the client's CPU time; then py-spy samples the
server during `--finds` more of the build's queries. Writes `OUT.json` (the times; the samples
under the server's find handler and the share of them under each step in `STEPS`) and `OUT.txt`
(the profile summary, `bench.pyspy_summary`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench import pyspy_summary
from bench.search_eval.dataset import load
from bench.search_eval.scale import Vocabulary, synthetic_documents
from bench.suites.search import DIMENSION, SEED, _load
from memstream.runtime.servers import SecantusServer
from memstream.sdk.read_model import ReadModel
from projections.store import MEMORIES

RATE = 200
"""py-spy samples per second."""
KINDS = ("projected", "whole documents")
STEPS = {
    "find (the query handler)": "_find (secantus/commands.py)",
    "the index walk and the documents' reads and BSON decoding": (
        "Storage._try_index_lookup (secantus/storage.py)"
    ),
    "the filter checked again per document": "matches (secantus/query.py)",
    "the projection": "apply_projection_batch (secantus/projection.py)",
}
"""Named steps of SecantusDB's find → the frame their samples are counted under."""


async def _finds(uri: str, database: str, user: str, rounds: int) -> dict[str, Any]:
    """Seconds and client CPU seconds of the build's query and of the same without projection."""
    read_model = ReadModel(uri, database)
    found: dict[str, Any] = {kind: {"s": [], "client_cpu_s": []} for kind in KINDS}
    try:
        await read_model.profile(user)
        for number in range(rounds * 2):
            kind = KINDS[number % 2]
            started, cpu = time.perf_counter(), time.process_time()
            if kind == "projected":
                await read_model._indexed_memories(user)
            else:
                await read_model._find(MEMORIES, {"user_id": user, "status": "current"})
            found[kind]["s"].append(time.perf_counter() - started)
            found[kind]["client_cpu_s"].append(time.process_time() - cpu)
    finally:
        await read_model.close()
    return found


async def _projected_finds(uri: str, database: str, user: str, rounds: int) -> None:
    read_model = ReadModel(uri, database)
    try:
        for _ in range(rounds):
            await read_model._indexed_memories(user)
    finally:
        await read_model.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.search_first_profile")
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--finds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("search-first-profile"))
    args = parser.parse_args(argv)
    documents = synthetic_documents(args.size, DIMENSION, Vocabulary.of(load()), SEED + args.size)
    user = str(documents[0]["user_id"])
    with tempfile.TemporaryDirectory() as work, SecantusServer(Path(work) / "mongo") as server:
        database = f"profile-{uuid.uuid4().hex[:8]}"
        _load(server.uri, database, documents, lists=False)
        timed = asyncio.run(_finds(server.uri, database, user, args.finds))
        raw = Path(work) / "profile.txt"
        binary = Path(sys.executable).parent / "py-spy"
        command = [str(binary), "record", "--format", "raw", "--rate", str(RATE), "-o", str(raw)]
        spy = subprocess.Popen([*command, "--pid", str(server.pid)], stdout=subprocess.DEVNULL)
        try:
            time.sleep(1.0)  # py-spy attached
            asyncio.run(_projected_finds(server.uri, database, user, args.finds))
        finally:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
        profile = pyspy_summary.parse(raw.read_text().splitlines())
    handler = profile.under[STEPS["find (the query handler)"]]
    report: dict[str, Any] = {
        "size": args.size,
        "finds": timed,
        "samples": profile.samples,
        "rate": RATE,
        "steps_samples": {name: profile.under[frame] for name, frame in STEPS.items()},
        "steps_share_of_find": {
            name: profile.under[frame] / handler if handler else None
            for name, frame in STEPS.items()
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    title = f"SecantusDB during {args.finds} finds of {args.size:,} memories (the build's query)"
    args.out.with_suffix(".txt").write_text(pyspy_summary.render(profile, title=title, rate=RATE))
    print(json.dumps(report["steps_share_of_find"], indent=2))
    print(json.dumps(timed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
