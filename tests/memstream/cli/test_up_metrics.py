"""Metrics and probes of a running `memstream up`: every worker serves `/metrics`, `/healthz` and
`/readyz` on a port of its own, `memstream status` lists them, and after a workload (turns over
HTTP, one poison record) the scraped values are what the workload did."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from memstream.config import load_settings
from memstream.runtime.servers import free_port
from tests.memstream.cli.test_up_restart import fact, memstream_up
from tests.support.pipeline import eventually, produce_raw
from tests.support.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.integration


def scraped(address: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of `address`/metrics: (name, sorted labels) -> value."""
    text = httpx.get(f"{address}/metrics", timeout=5).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    return sum(
        found
        for (sample, sample_labels), found in samples.items()
        if sample == name and set(labels.items()) <= set(sample_labels)
    )


def test_every_worker_and_the_http_api_serve_metrics_that_count_the_workload(
    tmp_path: Path,
) -> None:
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
            status = subprocess.run(
                [sys.executable, "-m", "memstream", "status", "--json"],
                env=up.environment,
                capture_output=True,
                text=True,
                timeout=120,
            )
            addresses = json.loads(status.stdout)["metrics"]
            stages = {"window", "projector", "extract:semantic"}
            assert stages <= set(addresses), status.stdout
            for address in addresses.values():
                assert httpx.get(f"{address}/healthz", timeout=5).status_code == 200
                assert httpx.get(f"{address}/readyz", timeout=5).status_code == 200

            eventually(
                lambda: httpx.get(f"{url}/readyz", timeout=2).status_code,
                lambda code: code == 200,
                timeout=60,
                what="the HTTP API to be ready",
            )
            key = subprocess.run(
                [sys.executable, "-m", "memstream", "keys", "create", "--name", "m",
                 "--application", "acme"],
                env=up.environment, capture_output=True, text=True, check=True, timeout=60,
            ).stdout.strip()  # fmt: skip
            headers = {"Authorization": f"Bearer {key}"}
            turns = {"user_id": "ann", "session_id": "s1",
                     "messages": [{"role": "user", "content": "I live in Lisbon."},
                                  {"role": "assistant", "content": "Nice."}]}  # fmt: skip
            assert httpx.post(f"{url}/v1/turns", json=turns, headers=headers).status_code == 202
            flush = {"user_id": "ann", "session_id": "s1"}
            assert httpx.post(f"{url}/v1/flush", json=flush, headers=headers).status_code == 202
            settings = load_settings(environ=up.environment)
            poison = [(b"ann|s2", b"this is not an event", None)]
            topic = settings.kafka.topics.turns
            asyncio.run(produce_raw(settings.kafka.bootstrap_servers or "", topic, poison))

            semantic = eventually(
                lambda: scraped(addresses["extract:semantic"]),
                lambda found: value(found, "memstream_extraction_seconds_count") >= 1,
                timeout=120,
                what="the semantic stage to have extracted the snapshot",
            )
            window = eventually(
                lambda: scraped(addresses["window"]),
                lambda found: value(found, "memstream_dead_letters_total") >= 1,
                timeout=60,
                what="the window to have dead-lettered the poison",
            )
            projector = scraped(addresses["projector"])
            api = scraped(url)

    chat = llm.chat_requests
    assert (
        value(window, "memstream_records_in_total", stage="window") == 4
    )  # 2 turns, flush, poison
    assert value(window, "memstream_window_promotions_total", reason="flush") == 1
    assert value(window, "memstream_window_promote_latency_seconds_count", reason="flush") == 1
    assert value(window, "memstream_records_out_total", topic=settings.kafka.topics.snapshots) == 1
    assert value(window, "memstream_dead_letters_total", stage="window") == 1
    assert value(window, "memstream_worker_info", stage="window") == 1
    assert value(semantic, "memstream_llm_calls_total", memory_type="semantic",
                 outcome="answered") == len(chat)  # fmt: skip
    assert value(semantic, "memstream_llm_tokens_total", kind="prompt") > 0
    assert value(semantic, "memstream_llm_calls_in_flight") == 0
    assert value(semantic, "memstream_records_in_total", stage="extract-semantic") == 1
    assert value(projector, "memstream_projector_batch_records_sum") >= 4
    assert value(projector, "memstream_projector_write_seconds_count") >= 1
    assert value(api, "memstream_http_requests_total", route="/v1/turns", method="POST",
                 status="202") == 1  # fmt: skip
    assert value(api, "memstream_http_requests_total", route="/v1/flush", status="202") == 1
