"""The curl examples of docs/http-and-mcp.md and docs/forgetting.md (a client in another language)
run as written against the API."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.support.api import ServedApi
from tests.support.documentation import documented_example
from tests.support.pipeline import eventually

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl"),
]


def sh_example(name: str) -> str:
    return documented_example(name, language="sh")


def run(script: str, api: ServedApi) -> str:
    environment = {**os.environ, "MEMSTREAM_URL": api.url, "MEMSTREAM_KEY": api.keys["acme"]}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_documented_curl_examples_remember_and_recall(api: ServedApi) -> None:
    remembered = run(sh_example("curl-remember"), api)
    assert '"user_id":"acme-ann"' in remembered and '"turn_ids"' in remembered
    recalled = eventually(
        lambda: run(sh_example("curl-recall"), api),
        lambda out: out.count("The user works at Stripe.") >= 3,
        what="search, context and memories all showing the memory",
    )
    assert '"next_cursor":null' in recalled


def test_the_documented_curl_example_forgets_a_session_and_reads_its_receipt(
    api: ServedApi,
) -> None:
    run(sh_example("curl-remember"), api)
    eventually(
        lambda: run(sh_example("curl-recall"), api),
        lambda out: "The user works at Stripe." in out,
        what="the memory searchable",
    )
    receipt = run(sh_example("curl-forget"), api)
    assert '"kind":"session"' in receipt and "Stripe" not in receipt
    recalled = eventually(
        lambda: run(sh_example("curl-recall"), api),
        lambda out: "Stripe" not in out,
        what="the forgotten session's memory gone from search, context and memories",
    )
    assert '"next_cursor":null' in recalled
