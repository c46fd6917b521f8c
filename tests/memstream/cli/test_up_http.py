"""`memstream up --http-port`: the HTTP API served beside the embedded pipeline, used with a key
made by `memstream keys create` against the database `up` started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from memstream.runtime.servers import free_port
from memstream.sdk.http_client import HttpMemoryClient
from tests.memstream.cli.test_up_restart import fact, memstream_up
from tests.support.pipeline import eventually
from tests.support.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.integration


def test_up_with_an_http_port_remembers_and_recalls_for_a_key(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with ScriptedLLM() as llm:
        llm.on("Lisbon", fact("The user lives in Lisbon.", "location"), scope="last_user")
        with memstream_up(
            tmp_path / "data",
            llm,
            tmp_path / "up.log",
            ephemeral=True,
            arguments=("--http-port", str(port)),
        ) as up:
            eventually(
                lambda: _status(f"{url}/openapi.json"),
                lambda status: status == 200,
                timeout=60,
                what="the HTTP API of memstream up",
            )
            create = ["keys", "create", "--name", "web", "--application", "acme"]
            created = subprocess.run(
                [sys.executable, "-m", "memstream", *create],
                env=up.environment,
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            )
            key = created.stdout.strip()
            with HttpMemoryClient(url, key) as client:
                client.record(
                    "chat-1", [{"role": "user", "content": "I live in Lisbon."}], user_id="ann"
                )
                client.flush("chat-1", user_id="ann")
                memories = eventually(
                    lambda: list(client.memories(user_id="ann")),
                    lambda found: len(found) == 1,
                    timeout=120,
                    what="the memory, read over HTTP",
                )
            assert httpx.get(f"{url}/v1/memories", params={"user_id": "ann"}).status_code == 401
    assert [m["text"] for m in memories] == ["The user lives in Lisbon."]


def _status(address: str) -> int:
    try:
        return httpx.get(address, timeout=2).status_code
    except httpx.HTTPError:
        return 0
