"""The local LLM server: start/stop behaviour with a stand-in, and a real json_object completion."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memstream.runtime.local.llm import LocalLLMServer, LocalLLMUnavailable
from memstream.runtime.local.weights import (
    DEFAULT_MODEL,
    SMALL_MODEL,
    ModelAssemblyError,
    assemble_model,
    default_cache_dir,
)

FAKE_SERVER = textwrap.dedent('''
    """Answers GET /v1/models like llama_cpp.server (after an optional delay), or fails."""
    import argparse, json, os, sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer

    parser = argparse.ArgumentParser()
    for name in ("--model", "--model_alias", "--host", "--port", "--n_ctx", "--n_threads"):
        parser.add_argument(name)
    args = parser.parse_args()
    print("fake server starting with", args.model_alias, flush=True)
    if os.environ.get("FAKE_FAIL"):
        print("error: cannot load model", flush=True)
        sys.exit(3)
    time.sleep(float(os.environ.get("FAKE_DELAY", "0")))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"data": [{"id": args.model_alias}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

    HTTPServer((args.host, int(args.port)), Handler).serve_forever()
''')


@pytest.fixture
def fake_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    package = tmp_path / "site" / "fake_llama"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "server.py").write_text(FAKE_SERVER)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return {"PYTHONPATH": str(tmp_path / "site")}


def _server(tmp_path: Path, env: dict[str, str], startup_timeout: float = 30.0) -> LocalLLMServer:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    return LocalLLMServer(
        model,
        alias="fake",
        log_path=tmp_path / "llm.log",
        server_module="fake_llama.server",
        env=env,
        startup_timeout=startup_timeout,
    )


def test_starts_answers_and_stops(tmp_path: Path, fake_module: dict[str, str]) -> None:
    with _server(tmp_path, fake_module) as server:
        assert server.running
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert server.model == "fake"
        assert "--model_alias" in server.command()
    assert not server.running
    assert "fake server starting with fake" in (tmp_path / "llm.log").read_text()
    server.stop()  # idempotent


def test_exit_during_start_reports_log_tail(tmp_path: Path, fake_module: dict[str, str]) -> None:
    server = _server(tmp_path, {**fake_module, "FAKE_FAIL": "1"})
    with pytest.raises(LocalLLMUnavailable, match=r"(?s)exited with code 3.*cannot load model"):
        server.start()
    assert not server.running


def test_startup_timeout_is_bounded(tmp_path: Path, fake_module: dict[str, str]) -> None:
    server = _server(tmp_path, {**fake_module, "FAKE_DELAY": "30"}, startup_timeout=1.5)
    started = time.monotonic()
    with pytest.raises(LocalLLMUnavailable, match="did not answer"):
        server.start()
    assert time.monotonic() - started < 10
    assert not server.running


def test_missing_model_file(tmp_path: Path, fake_module: dict[str, str]) -> None:
    server = LocalLLMServer(
        tmp_path / "absent.gguf",
        alias="x",
        log_path=tmp_path / "llm.log",
        server_module="fake_llama.server",
        env=fake_module,
    )
    with pytest.raises(LocalLLMUnavailable, match="model file not found"):
        server.start()
    assert not server.running


def test_busy_port_is_refused(tmp_path: Path, fake_module: dict[str, str]) -> None:
    with _server(tmp_path, fake_module) as first:
        second = LocalLLMServer(
            first.model_path,
            alias="fake",
            port=first.port,
            log_path=tmp_path / "second.log",
            server_module="fake_llama.server",
            env=fake_module,
        )
        with pytest.raises(LocalLLMUnavailable, match="already in use"):
            second.start()
        assert first.running


def test_default_log_lives_in_a_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_module: dict[str, str]
) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.chdir(tmp_path)  # a relative model path is resolved in this process
    server = LocalLLMServer(
        Path("model.gguf"), alias="fake", server_module="fake_llama.server", env=fake_module
    )
    with server:
        assert server.command()[server.command().index("--model") + 1] == str(model)
        assert "fake server starting with fake" in server.log_tail()
    assert not server.log_path.exists()
    assert not server.workdir.exists()


def test_missing_runtime_names_the_extra(tmp_path: Path) -> None:
    server = LocalLLMServer(tmp_path / "m.gguf", alias="x", server_module="no_such_runtime.server")
    with pytest.raises(LocalLLMUnavailable, match=r"memstream\[local\]"):
        server.start()


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama-cpp-python is not installed (pip install 'memstream[local]')",
)
def test_real_model_answers_json_object(tmp_path: Path) -> None:
    import openai

    if os.environ.get("MEMSTREAM_LOCAL_MODEL"):
        model = Path(os.environ["MEMSTREAM_LOCAL_MODEL"])
        alias = model.stem
    else:
        # The small model when its parts are installed (faster), else the default one.
        for spec in (SMALL_MODEL, DEFAULT_MODEL):
            try:
                model = assemble_model(spec, default_cache_dir())
            except ModelAssemblyError:
                continue
            alias = spec.alias
            break
        else:
            pytest.skip("no model parts installed: pip install 'memstream[local-small]'")
    with LocalLLMServer(
        model, alias=alias, log_path=tmp_path / "llm.log", startup_timeout=180
    ) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="not-needed", timeout=300)
        response = client.chat.completions.create(
            model=server.model,
            messages=[
                {"role": "system", "content": 'Answer with one JSON object: {"facts": [...]}.'},
                {
                    "role": "user",
                    "content": "Conversation:\n[user]: I live in Lisbon.\n"
                    "List the user's facts as strings.",
                },
            ],
            response_format={"type": "json_object"},
            temperature=0,
            max_tokens=128,
        )
    answer = json.loads(response.choices[0].message.content or "")
    assert isinstance(answer, dict)


def test_server_dies_with_a_killed_parent(tmp_path: Path, fake_module: dict[str, str]) -> None:
    parent = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from memstream.runtime.local.llm import LocalLLMServer
        model = Path({str(tmp_path / "model.gguf")!r}); model.write_bytes(b"GGUF")
        server = LocalLLMServer(model, alias="fake", server_module="fake_llama.server",
                                log_path=Path({str(tmp_path / "llm.log")!r}))
        server.start()
        print(server.pid, flush=True)
        time.sleep(60)
    """)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([fake_module["PYTHONPATH"], str(Path(__file__).parents[4])]),
    }
    process = subprocess.Popen(
        [sys.executable, "-c", parent], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert process.stdout is not None
        child = int(process.stdout.readline())
        process.kill()  # no clean-up code runs in the parent
        process.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child)
    finally:
        process.kill()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead (its parent is gone and init will reap it).
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return True
