"""`memstream status` on the LLM: whether the endpoint answers (the local server `up` records in
up.json, or a configured one), how often `up` restarted the local server, and the verdict."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from memstream.config import Settings, load_settings
from memstream.runtime.servers.leftovers import RunRecord, read_run_record
from memstream.runtime.status import EXIT_CODES, _health, _models, format_status
from tests.support.llm_process import StandInLLM
from tests.support.scripted_llm import ScriptedLLM


def settings_for(tmp_path: Path, **environment: str) -> Settings:
    config = tmp_path / "config.yaml"
    config.write_text("# defaults and the environment\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMSTREAM_"))}
    return load_settings(
        environ={
            **base,
            "MEMSTREAM_CONFIG": str(config),
            "MEMSTREAM_DATA_DIR": str(tmp_path / "data"),
            **environment,
        }
    )


def reachable_everything_else(models: dict[str, Any]) -> dict[str, Any]:
    """A report whose broker and database answer and that has no dead letters."""
    return {
        "health": "",
        "log": "ephemeral Tansu",
        "broker": {"reachable": True},
        "database": {"reachable": True},
        "enabled_types": ["semantic"],
        "dead_letters": {},
        "models": {**models, "problems": []},
    }


def recorded_up(data_dir: Path, server: StandInLLM, restarts: int, up: bool) -> RunRecord:
    """The record a running `memstream up` (this process) writes for its local LLM server."""
    record = RunRecord(data_dir)
    record.claim()
    record.describe(
        llm_local=True,
        llm_base_url=server.base_url,
        llm_health_url=server.health_url,
        supervision={
            "local-llm": {
                "restarts": restarts,
                "up": up,
                "last_exit": "was killed by SIGKILL" if restarts else None,
            }
        },
    )
    return record


def test_the_local_llm_server_up_runs_is_reported_reachable_with_its_restarts(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path)
    with StandInLLM(tmp_path / "llm") as server:
        record = recorded_up(settings.data_dir, server, restarts=2, up=True)
        models = _models(settings, 2.0, read_run_record(settings.data_dir))
        record.release()
    assert models["llm_reachable"] is True
    assert models["local_llm"] == {
        "base_url": server.base_url,
        "restarts": 2,
        "up": True,
        "last_exit": "was killed by SIGKILL",
    }
    report = reachable_everything_else(models)
    assert _health(report) == "healthy"
    report["health"] = "healthy"
    text = format_status(report)
    assert "llm: the packaged local model (started by `memstream up` / `memstream demo`)" in text
    assert ", reachable" in text
    assert (
        f"local LLM server: running at {server.base_url}, restarted 2 times by memstream up; "
        "it last was killed by SIGKILL"
    ) in text


def test_a_dead_local_llm_server_makes_status_degraded_and_says_so(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    server = StandInLLM(tmp_path / "llm").start()
    record = recorded_up(settings.data_dir, server, restarts=1, up=False)
    server.kill()  # dead, `up` waiting out its back-off
    try:
        models = _models(settings, 2.0, read_run_record(settings.data_dir))
    finally:
        record.release()
        server.cleanup()
    assert models["llm_reachable"] is False
    assert server.health_url in models["llm_error"]
    report = reachable_everything_else(models)
    report["health"] = _health(report)
    assert report["health"] == "degraded" and EXIT_CODES["degraded"] == 1
    text = format_status(report)
    assert ", UNREACHABLE (" in text
    assert "local LLM server: restarting at" in text and "restarted 1 time by" in text


def test_without_a_running_up_the_local_llm_is_not_probed(tmp_path: Path) -> None:
    models = _models(settings_for(tmp_path), 2.0, None)
    assert "llm_reachable" not in models and "local_llm" not in models


@pytest.mark.parametrize("alive", [True, False])
def test_a_configured_endpoint_is_asked_for_its_models(tmp_path: Path, alive: bool) -> None:
    with ScriptedLLM() as llm:
        url = llm.base_url
        settings = settings_for(
            tmp_path,
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="secret",
            MEMSTREAM_LLM_MODEL=llm.model,
        )
        if not alive:
            llm.stop()
        models = _models(settings, 2.0, None)
    assert models["llm_reachable"] is alive
    if not alive:
        assert f"{url}/models" in models["llm_error"]
