"""Supervising the local LLM server: restarted on its port when it dies, given up on when it keeps
dying (with `memstream up`'s exit), reported to `up.json`, and a real pipeline that goes on
after the server it was asking was killed mid-request.

The server here is a stand-in process (`tests.support.llm_process`), not the packaged model: the
model takes seconds to minutes a request on 2 shared cores, and what is tested is what happens
to a *process* that dies. bench/soak.py kills the real model under `memstream up`.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tenacity import wait_fixed

import memstream.cli.main as cli
import memstream.runtime.pipeline as runtime
import memstream.runtime.supervisor as supervisor
from memstream.runtime.pipeline import Pipeline
from memstream.runtime.servers import LoopbackServer
from memstream.runtime.supervisor import RestartPolicy, ServerGaveUp, Supervisor
from memstream.runtime.worker import READY_MARKER
from tests.support.llm_process import StandInLLM
from tests.support.pipeline import PipelineHarness, eventually

QUICK = RestartPolicy(max_crashes=3, wait=wait_fixed(0.2))

SERVER = """
import http.server, pathlib, sys, threading, time
port, runs_file, crashes = int(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
runs = int(runs_file.read_text()) + 1 if runs_file.exists() else 1
runs_file.write_text(str(runs))
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", port), Health)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"listening on {port}, run {runs}", file=sys.stderr, flush=True)
if crashes < 0 or runs <= crashes:
    time.sleep(0.5)
    print(f"boom: the LLM server run {runs} ran out of memory", file=sys.stderr, flush=True)
    sys.exit(3)
time.sleep(120)
"""


class FlakyServer(LoopbackServer):
    """An HTTP server that dies 0.5 s after it started on its first `crashes` runs (-1: always)."""

    name = "local-llm"

    def __init__(self, workdir: Path, *, crashes: int) -> None:
        super().__init__(workdir)
        self.crashes = crashes
        self.runs_file = workdir / "runs"

    def _command(self) -> list[str]:
        return [
            sys.executable,
            "-c",
            SERVER,
            str(self.port),
            str(self.runs_file),
            str(self.crashes),
        ]

    def _is_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.address}/", timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False


STAGE = """
import sys, time
print(sys.argv[1], sys.argv[2], file=sys.stderr, flush=True)
time.sleep(120)
"""


def steady_pipeline(tmp_path: Path) -> Pipeline:
    command = [sys.executable, "-c", STAGE, READY_MARKER, "steady"]
    return Pipeline(["steady"], {}, tmp_path / "logs", commands={"steady": command})


def supervise_until(sup: Supervisor, done: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not done after {timeout}s: {sup.state()}"
        sup.check()
        time.sleep(0.05)


@pytest.fixture
def steady(tmp_path: Path) -> Iterator[Pipeline]:
    with steady_pipeline(tmp_path) as pipeline:
        yield pipeline


def test_a_killed_llm_server_is_restarted_on_its_port_and_reported_up_again(
    tmp_path: Path, steady: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="memstream.runtime.supervisor")
    with FlakyServer(tmp_path / "llm", crashes=0) as server:
        port, first = server.port, server.pid
        sup = Supervisor(steady, QUICK, servers={"local-llm": server}, interval=0.05)
        assert sup.state()["local-llm"] == {"restarts": 0, "up": True, "last_exit": None}
        assert first is not None
        os.kill(first, signal.SIGKILL)  # as the OOM killer would: not reaped by us first

        supervise_until(sup, lambda: sup.restarts["local-llm"] == 1)
        assert sup.state()["local-llm"]["up"] is False  # restarted, not answering yet
        supervise_until(sup, lambda: sup.state()["local-llm"]["up"])
        assert server.port == port and server.pid != first and server.is_ready()
        assert sup.state() == {
            "steady": {"restarts": 0, "up": True, "last_exit": None},
            "local-llm": {"restarts": 1, "up": True, "last_exit": "was killed by SIGKILL"},
        }
    messages = [r.getMessage() for r in caplog.records]
    crash = next(m for m in messages if "restarting it in" in m)
    assert crash.startswith("server local-llm was killed by SIGKILL after ")
    assert "server local-llm restarted (attempt 1)" in messages
    assert "server local-llm is ready again" in messages


def test_an_llm_server_that_keeps_dying_is_given_up_on_and_every_stage_stopped(
    tmp_path: Path, steady: Pipeline
) -> None:
    with FlakyServer(tmp_path / "llm", crashes=-1) as server:
        sup = Supervisor(steady, QUICK, servers={"local-llm": server}, interval=0.05)
        with pytest.raises(ServerGaveUp) as gave_up:
            supervise_until(sup, lambda: False)
        assert not steady.processes["steady"].running
    assert gave_up.value.server == "local-llm"
    message = str(gave_up.value)
    assert message.startswith("server local-llm exited with code 3 after ")
    assert "(crash 3 within 300s); giving up and stopping every stage" in message
    assert "boom: the LLM server run 3 ran out of memory" in message  # its log tail
    assert sup.restarts["local-llm"] == 2


def test_a_restart_that_finds_its_port_taken_counts_as_a_crash_and_is_tried_again(
    tmp_path: Path, steady: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="memstream.runtime.supervisor")
    policy = RestartPolicy(max_crashes=5, wait=wait_fixed(0.3))
    with FlakyServer(tmp_path / "llm", crashes=0) as server:
        sup = Supervisor(steady, policy, servers={"local-llm": server}, interval=0.05)
        server.kill()
        squatter = socket.socket()
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", server.port))
        squatter.listen()
        try:
            supervise_until(sup, lambda: "could not be started" in caplog.text)
        finally:
            squatter.close()
        supervise_until(sup, lambda: sup.state()["local-llm"]["up"] and server.is_ready())
    assert "port 127.0.0.1:" in caplog.text and "is already in use" in caplog.text
    assert sup.restarts["local-llm"] >= 2  # the failed start, then the one that took


def test_run_reports_the_supervision_state_after_every_change(
    tmp_path: Path, steady: Pipeline
) -> None:
    reports: list[dict[str, Any]] = []
    with FlakyServer(tmp_path / "llm", crashes=-1) as server:
        sup = Supervisor(steady, QUICK, servers={"local-llm": server}, interval=0.05)
        with pytest.raises(ServerGaveUp):
            sup.run(report=reports.append)
    assert reports[0]["local-llm"] == {"restarts": 0, "up": True, "last_exit": None}
    assert [r["local-llm"]["restarts"] for r in reports][-1] == 2
    assert {"restarts": 1, "up": False, "last_exit": "exited with code 3"} in [
        r["local-llm"] for r in reports
    ]


@contextmanager
def stand_in_running_pipeline(
    settings: Any, tmp_path: Path, server: LoopbackServer
) -> Iterator[tuple[Any, Any, Pipeline]]:
    with steady_pipeline(tmp_path) as pipeline:
        infra = runtime.Infrastructure("127.0.0.1:1", "mongodb://127.0.0.1:2", llm_server=server)
        yield settings, infra, pipeline


def test_up_exits_1_naming_the_llm_server_that_keeps_dying_and_its_log_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = FlakyServer(tmp_path / "llm", crashes=-1).start()
    monkeypatch.setattr(
        runtime,
        "running_pipeline",
        lambda settings, **_: stand_in_running_pipeline(settings, tmp_path, server),
    )
    monkeypatch.setattr(supervisor, "RestartPolicy", lambda: QUICK)
    monkeypatch.setattr(cli, "_refuse_if_unready", lambda settings: None)
    monkeypatch.setattr(cli, "_stop_on_signals", lambda: None)  # not in the test process
    monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    try:
        assert cli.main(["up"]) == 1
    finally:
        server.cleanup()
    err = capsys.readouterr().err
    assert "memstream: server local-llm exited with code 3" in err
    assert "boom: the LLM server run 3 ran out of memory" in err


# -- a real pipeline -----------------------------------------------------------------------------

LISBON = {
    "facts": [
        {
            "subject": "the user",
            "statement": "The user lives in Lisbon.",
            "owner": "user",
            "category": "basic_info",
            "profile_field": "location",
        }
    ]
}


@pytest.mark.integration
def test_the_snapshot_a_killed_llm_server_was_answering_is_extracted_once_after_its_restart(
    pipeline_factory: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="memstream.runtime.supervisor")
    with StandInLLM(tmp_path / "llm", answer=LISBON, latency=3.0) as llm:
        harness: PipelineHarness = pipeline_factory(OPENAI_BASE_URL=llm.base_url)
        sup = Supervisor(
            harness.pipeline,
            RestartPolicy(wait=wait_fixed(0.5)),
            servers={"local-llm": llm},
            interval=0.2,
        )
        port = llm.port
        harness.record("tim", "s1", [{"role": "user", "content": "I live in Lisbon."}])
        harness.flush("tim", "s1")
        eventually(
            lambda: (sup.check(), llm.chat_requests_received())[1],
            lambda received: received >= 1,
            timeout=90,
            what="the extraction's request to reach the LLM server",
        )
        assert llm.pid is not None
        os.kill(llm.pid, signal.SIGKILL)  # 3 s before it would have answered

        memories = eventually(
            lambda: (sup.check(), harness.memories(user_id="tim"))[1],
            lambda found: len(found) == 1,
            timeout=120,
            what="the memory, extracted by the restarted server",
        )
        assert llm.port == port and llm.chat_requests_received() >= 1  # the new run answered
        [snapshot] = harness.snapshots(user_id="tim")
        assert sup.restarts == {stage: 0 for stage in harness.pipeline.processes} | {"local-llm": 1}
    assert [m["text"] for m in memories] == ["The user lives in Lisbon."]
    result = snapshot["extractions"]["semantic"]
    assert result["failure"] is None and result["attempts"] == 1  # the outage was waited out
    assert harness.db["dead_letters"].count_documents({}) == 0
    assert harness.db["memory_events"].count_documents({"user_id": "tim"}) == 1
    assert "server local-llm was killed by SIGKILL" in caplog.text
