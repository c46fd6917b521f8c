"""`memstream up` stopped and started again on the same data directory, the session id reused:
nothing overwritten or dropped (the embedded broker's log is memory-only, the database is not)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memstream.client import MemoryClient
from memstream.config import load_settings
from memstream.sync_client import SyncMemoryClient
from tests.support.pipeline import eventually
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


@contextmanager
def memstream_up(data_dir: Path, llm: ScriptedLLM, log: Path) -> Iterator[dict[str, str]]:
    """Run `memstream up` until the block ends (SIGTERM); yields the environment it printed."""
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
        "MEMSTREAM_ENABLED_EXTRACTIONS": "semantic",  # what restarts do to ids, not the types
        "MEMSTREAM_IDLE_CHECK_INTERVAL": "0.5",
    }
    for variable in ("KAFKA_BOOTSTRAP_SERVERS", "MONGODB_URI", "MONGODB_DATABASE"):
        environment.pop(variable, None)
    with log.open("ab") as output:
        up = subprocess.Popen(
            [sys.executable, "-m", "memstream", "up"],
            stdout=subprocess.PIPE,
            stderr=output,
            env=environment,
        )
    printed: dict[str, str] = {}
    try:
        assert up.stdout is not None
        deadline = time.monotonic() + 240
        while "MONGODB_URI" not in printed or "KAFKA_BOOTSTRAP_SERVERS" not in printed:
            line = up.stdout.readline().decode()
            if not line and up.poll() is not None:
                raise AssertionError(f"memstream up exited:\n{log.read_text()[-3000:]}")
            if match := EXPORT.search(line):
                printed[match[1]] = match[2]
            assert time.monotonic() < deadline, "memstream up did not start in time"
        yield {**environment, **printed}
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(120)


def record_and_flush(environment: dict[str, str], content: str) -> None:
    async def send() -> None:
        async with MemoryClient(load_settings(environ=environment)) as client:
            await client.record("tim", "chat-1", [{"role": "user", "content": content}])
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


def test_a_restarted_up_with_a_reused_session_id_keeps_every_snapshot_and_memory(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    with ScriptedLLM() as llm:
        llm.on("Lisbon", fact("The user lives in Lisbon.", "location"), scope="last_user")
        llm.on("Stripe", fact("The user works at Stripe.", "employer"), scope="last_user")

        with memstream_up(data_dir, llm, tmp_path / "up-1.log") as environment:
            record_and_flush(environment, "I live in Lisbon.")
            eventually(
                lambda: read(environment)[1],
                lambda m: len(m) == 1,
                timeout=120,
                what="the first life's memory",
            )

        with memstream_up(data_dir, llm, tmp_path / "up-2.log") as environment:
            record_and_flush(environment, "I work at Stripe.")  # the same session id again
            snapshots, memories, profile = eventually(
                lambda: read(environment),
                lambda state: len(state[1]) == 2,
                timeout=120,
                what="the second life's memory beside the first",
            )

    assert [s["seq"] for s in snapshots] == [0, 0]  # the log restarted, the ids did not repeat
    assert len({s["_id"] for s in snapshots}) == 2
    assert all(s["turn_count"] == 1 and s["raw_history"] for s in snapshots)
    assert sorted(m["text"] for m in memories) == [
        "The user lives in Lisbon.",
        "The user works at Stripe.",
    ]
    assert profile is not None
    by_id = {m["memory_id"]: m["text"] for m in memories}
    for field in ("location", "employer"):
        entry = profile["fields"][field]
        assert by_id[entry["memory_id"]] == entry["value"], f"profile {field} has no memory"
