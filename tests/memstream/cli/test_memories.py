"""`memstream memories | search | context | history`: what a running pipeline learned, read from
the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.factories import STRIPE_FACTS
from tests.support.pipeline import PipelineHarness, eventually

pytestmark = pytest.mark.integration


def memstream(pipeline: PipelineHarness, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memstream", *arguments],
        env={**os.environ, **pipeline.environment},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_cli_shows_memories_search_results_context_and_history(
    pipeline_factory: Any,
) -> None:
    pipeline: PipelineHarness = pipeline_factory()
    pipeline.llm.on("Stripe", STRIPE_FACTS, scope="last_user")
    pipeline.record("gus", "s1", [{"role": "user", "content": "I work at Stripe."}])
    pipeline.flush("gus", "s1")
    (memory,) = eventually(
        lambda: pipeline.memories(user_id="gus"),
        lambda found: len(found) == 1,
        timeout=90,
        what="the memory",
    )
    listed = memstream(pipeline, "memories", "--user", "gus")
    assert listed.returncode == 0, listed.stderr
    expected = f"[semantic] v1 The user works at Stripe.  ({memory['memory_id']})"
    assert listed.stdout.strip() == expected

    found = memstream(pipeline, "search", "--user", "gus", "where does the user work", "--json")
    (hit,) = [json.loads(line) for line in found.stdout.splitlines()]
    assert hit["text"] == "The user works at Stripe." and "embedding" not in hit

    context = memstream(pipeline, "context", "--user", "gus", "job")
    assert "The user works at Stripe." in context.stdout
    recalled = memstream(pipeline, "context", "--user", "gus", "where do I work")
    assert "] User: I work at Stripe." in recalled.stdout  # the message, dated
    left_out = memstream(pipeline, "context", "--user", "gus", "work", "--past-messages", "0")
    assert left_out.returncode == 0 and "User: I work" not in left_out.stdout
    messages_only = memstream(
        pipeline, "context", "--user", "gus", "where do I work", "--per-type", "0"
    )
    assert "] User: I work at Stripe." in messages_only.stdout
    assert "## Facts" not in messages_only.stdout

    history = memstream(pipeline, "history", "--user", "gus", memory["memory_id"])
    assert history.stdout.strip() == expected
    unknown = memstream(pipeline, "history", "--user", "gus", "no-such-memory")
    assert unknown.returncode == 1
    assert memstream(pipeline, "memories", "--user", "nobody").stdout == ""
