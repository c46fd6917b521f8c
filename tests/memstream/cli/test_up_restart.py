"""`memstream up` stopped and started again on the same data directory.

The durable default (Apache Kafka under `data_dir/kafka`): turns recorded but not promoted when
`up` is stopped by Ctrl-C, SIGTERM or SIGKILL are still in the log after the restart and reach
one snapshot and their memory; a SIGKILLed `up` leaves no process behind that would block the
next one. `--ephemeral` (Tansu in memory, the database in a throwaway folder): each life starts
empty, so the log and the read model never disagree.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from memstream.config import load_settings
from memstream.runtime.servers.leftovers import RECORD_FILE, _alive
from memstream.sdk.client import MemoryClient
from memstream.sdk.sync_client import SyncMemoryClient
from tests.support.pipeline import eventually, read_topic
from tests.support.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.integration

EXPORT = re.compile(r"export (KAFKA_BOOTSTRAP_SERVERS|MONGODB_URI)=(\S+)")


def fact(statement: str, field: str) -> dict[str, Any]:
    return {
        "facts": [
            {
                "subject": "the user",
                "statement": statement,
                "owner": "user",
                "category": "basic_info",
                "profile_field": field,
            }
        ]
    }


@dataclass
class Up:
    process: subprocess.Popen[bytes]
    environment: dict[str, str]
    output: list[str]


@contextmanager
def memstream_up(
    data_dir: Path,
    llm: ScriptedLLM,
    log: Path,
    *,
    ephemeral: bool = False,
    stop: signal.Signals = signal.SIGTERM,
    arguments: tuple[str, ...] = (),
) -> Iterator[Up]:
    """Run `memstream up` until the block ends, then send it `stop` and wait for its exit."""
    config = data_dir.parent / "empty-config.yaml"
    config.write_text("# defaults and the environment\n")
    environment = {
        **os.environ,
        "MEMSTREAM_CONFIG": str(config),
        "MEMSTREAM_DATA_DIR": str(data_dir),
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "test",
        "MEMSTREAM_LLM_MODEL": llm.model,
        "MEMSTREAM_EMBEDDING_PROVIDER": "openai",
        "MEMSTREAM_EMBEDDING_MODEL": llm.embedding_model,
        "MEMSTREAM_MAX_MESSAGES": "10",
        "MEMSTREAM_ENABLED_EXTRACTIONS": "semantic",  # what restarts do to the log, not the types
        "MEMSTREAM_IDLE_CHECK_INTERVAL": "0.5",
    }
    for variable in ("KAFKA_BOOTSTRAP_SERVERS", "MONGODB_URI", "MONGODB_DATABASE"):
        environment.pop(variable, None)
    # -v: the log then times each server and worker stopped, should a stop ever be slow
    command = [sys.executable, "-m", "memstream", "-v", "up"]
    command += ["--ephemeral"] if ephemeral else []
    command += arguments
    with log.open("ab") as output:
        # As a script's background job starts it (SIGINT ignored): `up` must still stop on it.
        up = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=output,
            env=environment,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
    printed: dict[str, str] = {}
    lines: list[str] = []
    try:
        assert up.stdout is not None
        deadline = time.monotonic() + 300
        while "MONGODB_URI" not in printed or "KAFKA_BOOTSTRAP_SERVERS" not in printed:
            line = up.stdout.readline().decode()
            if not line and up.poll() is not None:
                raise AssertionError(f"memstream up exited:\n{log.read_text()[-3000:]}")
            lines.append(line)
            if match := EXPORT.search(line):
                printed[match[1]] = match[2]
            assert time.monotonic() < deadline, "memstream up did not start in time"
        yield Up(up, {**environment, **printed}, lines)
    finally:
        if up.poll() is None:
            up.send_signal(stop)
        try:
            up.wait(120)
        except subprocess.TimeoutExpired:
            up.kill()  # its servers and workers die with it
            up.wait()
            raise AssertionError(
                f"memstream up did not exit within 120 s of {stop.name}:\n{log.read_text()[-4000:]}"
            ) from None


def record(environment: dict[str, str], content: str, *, flush: bool) -> list[str]:
    async def send() -> list[str]:
        async with MemoryClient(load_settings(environ=environment)) as client:
            turns = await client.record("tim", "chat-1", [{"role": "user", "content": content}])
            if flush:
                await client.flush("tim", "chat-1")
            return [turn.event_id for turn in turns]

    return asyncio.run(send())


def flush(environment: dict[str, str]) -> None:
    async def send() -> None:
        async with MemoryClient(load_settings(environ=environment)) as client:
            await client.flush("tim", "chat-1")

    asyncio.run(send())


def read(environment: dict[str, str]) -> tuple[list[Any], list[Any], Any]:
    client = SyncMemoryClient(load_settings(environ=environment))
    try:
        return (
            client.snapshots("tim", "chat-1"),
            client.memories("tim"),
            client.profile("tim"),
        )
    finally:
        client.close()


def turn_ids_in_log(environment: dict[str, str]) -> set[str]:
    settings = load_settings(environ=environment)
    assert settings.kafka.bootstrap_servers
    records = asyncio.run(
        read_topic(
            settings.kafka.bootstrap_servers, settings.kafka.topics.turns, settings.kafka.partitions
        )
    )
    # The turns are sealed: their ids are not, and are all this needs.
    return {orjson.loads(r.value)["event_id"] for r in records if r.value is not None}


def children_of(data_dir: Path) -> dict[int, tuple[str, int | None]]:
    """Each child `up` recorded: its name and start time, by pid."""
    record = json.loads((data_dir / RECORD_FILE).read_text())
    return {int(pid): (child["name"], child["ticks"]) for pid, child in record["children"].items()}


# SIGINT leaves `up` the way SIGTERM does (both raise KeyboardInterrupt in it; see
# tests/memstream/cli/test_main.py, which checks both signals in a second): a clean stop and a kill.
STOPS = {"sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}


@pytest.mark.parametrize("stop", list(STOPS))
def test_turns_recorded_before_up_is_stopped_reach_one_snapshot_after_the_restart(
    tmp_path: Path, stop: str
) -> None:
    data_dir = tmp_path / "data"
    with ScriptedLLM() as llm:
        llm.on("Lisbon", fact("The user lives in Lisbon.", "location"))

        with memstream_up(data_dir, llm, tmp_path / "up-1.log", stop=STOPS[stop]) as first:
            assert any("durable Apache Kafka at" in line for line in first.output)
            recorded = record(first.environment, "I live in Lisbon.", flush=False)
            recorded += record(first.environment, "I cycle to work.", flush=False)
            children = children_of(data_dir)
            assert len(children) >= 3  # the database, the broker, the stage workers
        assert not first.process.returncode or stop == "sigkill"

        if stop == "sigkill":  # nothing of the first life may hold a port or a folder
            eventually(
                lambda: [(pid, n) for pid, (n, ticks) in children.items() if _alive(pid, ticks)],
                lambda alive: not alive,
                timeout=60,
                what="the killed up's children to die with it",
            )

        with memstream_up(data_dir, llm, tmp_path / "up-2.log") as second:
            assert set(recorded) <= turn_ids_in_log(second.environment), "the log lost turns"
            flush(second.environment)
            snapshots, memories, _ = eventually(
                lambda: read(second.environment),
                lambda state: len(state[0]) == 1 and len(state[1]) == 1,
                timeout=180,
                what="one snapshot of both turns and its memory",
            )

    [snapshot] = snapshots
    assert snapshot["turn_ids"] == recorded
    assert snapshot["turn_count"] == 2
    assert [m["text"] for m in memories] == ["The user lives in Lisbon."]
    assert not (data_dir / RECORD_FILE).exists()  # the second up stopped cleanly


def test_an_ephemeral_up_starts_each_life_empty_and_never_repeats_an_id(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with ScriptedLLM() as llm:
        llm.on("Lisbon", fact("The user lives in Lisbon.", "location"), scope="last_user")
        llm.on("Stripe", fact("The user works at Stripe.", "employer"), scope="last_user")

        with memstream_up(data_dir, llm, tmp_path / "up-1.log", ephemeral=True) as first:
            assert any("ephemeral Tansu" in line for line in first.output)
            record(first.environment, "I live in Lisbon.", flush=True)
            snapshots, memories, _ = eventually(
                lambda: read(first.environment),
                lambda state: len(state[1]) == 1,
                timeout=120,
                what="the first life's memory",
            )
            first_snapshot = snapshots[0]["_id"]

        with memstream_up(data_dir, llm, tmp_path / "up-2.log", ephemeral=True) as second:
            assert read(second.environment)[1] == []  # the database went with the log
            record(second.environment, "I work at Stripe.", flush=True)  # the same session id
            snapshots, memories, profile = eventually(
                lambda: read(second.environment),
                lambda state: len(state[1]) == 1,
                timeout=120,
                what="the second life's memory",
            )

    assert [s["seq"] for s in snapshots] == [0]
    assert snapshots[0]["_id"] != first_snapshot  # a restarted log, ids from the turns
    assert [m["text"] for m in memories] == ["The user works at Stripe."]
    assert profile is not None and profile["fields"]["employer"]["value"] == memories[0]["text"]
    assert not (data_dir / "mongo").exists()  # nothing of the database stayed behind
