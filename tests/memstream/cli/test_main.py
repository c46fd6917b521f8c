"""The `memstream` command: refusals are immediate and say what to set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from events.schema import json_schemas
from memstream.config import extractor_identity, load_settings


def memstream(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "MEMSTREAM_", "KAFKA_", "MONGODB_", "MONGOMEM_"))
    }
    return subprocess.run(
        [sys.executable, "-m", "memstream", *args],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def test_demo_without_an_llm_stops_at_once_naming_what_to_set(tmp_path: Path) -> None:
    started = time.monotonic()
    result = memstream("demo", cwd=tmp_path, env={"MEMSTREAM_LOCAL_LLM": "off"})
    assert result.returncode == 2
    assert "OPENAI_BASE_URL" in result.stderr and "MEMSTREAM_LLM_MODEL" in result.stderr
    assert time.monotonic() - started < 20  # nothing was started


def test_config_validate_reports_bad_values(tmp_path: Path) -> None:
    result = memstream("config", "validate", cwd=tmp_path, env={"MEMSTREAM_MAX_MESSAGES": "0"})
    assert result.returncode == 2
    assert "window.max_messages" in result.stderr and "MEMSTREAM_MAX_MESSAGES" in result.stderr


def test_schema_export_writes_one_schema_per_event(tmp_path: Path) -> None:
    result = memstream("schema", "export", str(tmp_path / "schemas"))
    assert result.returncode == 0, result.stderr
    written = sorted(p.name for p in (tmp_path / "schemas").iterdir())
    assert written == sorted(f"{name}.schema.json" for name in json_schemas())
    turn = json.loads((tmp_path / "schemas" / "TurnRecorded.schema.json").read_text())
    assert (
        "content" in turn["properties"]
        and turn["properties"]["event_type"]["const"] == "TurnRecorded"
    )


def test_up_serves_no_http_api_unless_a_port_is_set() -> None:
    from memstream.cli.main import _api_server
    from memstream.config import load_settings

    assert _api_server(load_settings(environ={}), None) is None


def test_config_shows_kafka_security_with_its_secrets_masked(tmp_path: Path) -> None:
    secured = {
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KAFKA_SASL_USERNAME": "alice",
        "KAFKA_SASL_PASSWORD": "alice-secret",
        "KAFKA_SSL_KEY_PASSWORD": "key-secret",
        "KAFKA_SSL_CAFILE": "/etc/kafka/ca.pem",
    }
    result = memstream("config", "validate", cwd=tmp_path, env=secured)
    assert "security_protocol: SASL_SSL" in result.stdout
    assert "sasl_mechanism: SCRAM-SHA-512" in result.stdout
    assert "ssl_cafile: /etc/kafka/ca.pem" in result.stdout
    assert "alice-secret" not in result.stdout and "key-secret" not in result.stdout
    assert "sasl_password: '***'" in result.stdout


def test_config_validate_names_the_extractor_in_use_and_its_digest(tmp_path: Path) -> None:
    config = tmp_path / "project-config.yaml"
    config.write_text("extractors:\n  v2: {temperature: 0.2}\n", encoding="utf-8")
    environment = {"MEMSTREAM_EXTRACTOR": "v2"}
    result = memstream("config", "validate", cwd=tmp_path, env=environment)
    digest = extractor_identity(load_settings(config, environment)).digest
    assert f"# extractor: v2, digest {digest} (as memories record it)" in result.stdout
    assert "temperature: 0.2" in result.stdout


def test_config_validate_refuses_a_sasl_login_without_a_password(tmp_path: Path) -> None:
    env = {"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_USERNAME": "alice"}
    result = memstream("config", "validate", cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert "KAFKA_SASL_PASSWORD" in result.stderr


STOP_ON_SIGNAL = """
import sys, time
import memstream.cli.main as cli
cli._stop_on_signals()
try:
    print("ready", flush=True)
    time.sleep(30)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(0)
sys.exit(3)
"""


def test_up_stops_on_sigint_and_sigterm_even_started_with_sigint_ignored() -> None:
    """`up` and `demo` leave through KeyboardInterrupt on both signals, also as a script's
    background job, which starts with SIGINT ignored (`test_up_restart.py` stops a whole `up`
    with SIGTERM and SIGKILL; SIGINT takes the same way out from here)."""
    import signal

    for stop in (signal.SIGINT, signal.SIGTERM):
        process = subprocess.Popen(
            [sys.executable, "-c", STOP_ON_SIGNAL],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        process.send_signal(stop)
        out, _ = process.communicate(timeout=30)
        assert (process.returncode, out.strip()) == (0, "interrupted"), stop


def test_a_local_model_swapped_by_a_promotion_is_supervised_and_recorded_for_status(
    tmp_path: Path,
) -> None:
    from memstream.cli.main import swap_local_llm
    from memstream.runtime.local.llm import LocalLLMServer
    from memstream.runtime.servers.leftovers import RunRecord, read_run_record

    record = RunRecord(tmp_path)
    record.claim()
    record.describe(
        llm_base_url="http://127.0.0.1:1/v1", llm_health_url="http://127.0.0.1:1/health"
    )
    supervised: list[tuple[str, object]] = []

    class Supervisor:
        def replace_server(self, name: str, server: object) -> None:
            supervised.append((name, server))

    server = LocalLLMServer(tmp_path / "large.gguf", alias="large", port=18181)
    swap_local_llm(Supervisor(), record, "local-llm", server)  # type: ignore[arg-type]
    assert supervised == [("local-llm", server)]
    written = read_run_record(tmp_path)
    assert written is not None
    assert written["llm_base_url"] == "http://127.0.0.1:18181/v1"
    assert written["llm_health_url"] == server.health_url != "http://127.0.0.1:1/health"
    record.release()
