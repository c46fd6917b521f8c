"""`memstream consolidate`: arguments refused before anything is sent, the summary it prints;
against a running pipeline, a run with `--wait` that says what it merged and what it cost."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from memstream.cli.consolidate import refusal, summary
from tests.memstream.cli.test_memories import memstream
from tests.support.pipeline import PipelineHarness, eventually

REX = "The user has a dog named Rex."
REX_AGAIN = "The user owns a dog named Rex."
SETTINGS = {
    "MEMSTREAM_REINFORCE_THRESHOLD": "0.97",
    "MEMSTREAM_ASK_THRESHOLD": "0.9",
    "MEMSTREAM_CONSOLIDATE_THRESHOLD": "0.75",
}


def arguments(**overrides: Any) -> argparse.Namespace:
    fields: dict[str, Any] = {"max_calls": 5, "by": "ops:dana", "reason": ""}
    fields.update(overrides)
    return argparse.Namespace(**fields)


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        ({}, None),
        ({"max_calls": 0}, None),
        ({"max_calls": -1}, "--max-calls"),
        ({"max_calls": 100_000}, "--max-calls"),
        ({"by": "  "}, "--by"),
        ({"reason": "x" * 1001}, "--reason"),
    ],
)
def test_arguments_are_checked_before_anything_is_sent(
    overrides: dict[str, Any], refused: str | None
) -> None:
    said = refusal(arguments(**overrides))
    assert said == refused if refused is None else (said is not None and refused in said)


def test_the_summary_says_what_was_merged_and_superseded_and_the_cost() -> None:
    run = {
        "memory_type": "semantic",
        "clusters_found": 3,
        "clusters_asked": 2,
        "clusters_skipped": 1,
        "usage": {"calls": 3, "prompt_tokens": 900, "completion_tokens": 60},
        "retired": [
            {"memory_id": "m2", "into": "m1", "action": "merge"},
            {"memory_id": "m4", "into": "m3", "action": "supersede"},
        ],
        "unchanged": None,
    }
    assert summary([run]) == [
        "semantic: 3 clusters, 2 asked, 1 skipped for the budget; cost 3 LLM calls, "
        "900 prompt + 60 completion tokens",
        "  m2 merged into m1",
        "  m4 superseded by m3",
    ]
    quiet = {**run, "retired": [], "unchanged": "no cluster of similar memories of one subject"}
    assert summary([quiet])[1] == "  nothing changed: no cluster of similar memories of one subject"


@pytest.mark.integration
def test_the_cli_consolidates_and_prints_what_it_did(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory(**SETTINGS)
    pipeline.llm.on("MEMORIES:", {"action": "MERGE", "keep": 1, "text": REX, "reason": "same"})
    pipeline.save("dana", "semantic", REX)
    pipeline.save("dana", "semantic", REX_AGAIN)
    eventually(lambda: pipeline.memories(user_id="dana"), lambda m: len(m) == 2, what="saves")

    done = memstream(
        pipeline, "consolidate", "--user", "dana", "--by", "ops:dana", "--max-calls", "2", "--wait"
    )
    assert done.returncode == 0, done.stderr
    consolidation_id, first, merged = done.stdout.splitlines()
    assert first.startswith("semantic: 1 clusters, 1 asked, 0 skipped for the budget; cost 1")
    assert " merged into " in merged
    current = eventually(
        lambda: pipeline.memories(user_id="dana", status="current"),
        lambda m: len(m) == 1,
        what="one memory",
    )
    assert current[0]["text"] == REX

    again = memstream(pipeline, "consolidate", "--user", "dana", "--wait", "--json")
    assert again.returncode == 0, again.stderr
    _, *document = again.stdout.splitlines()
    (run,) = json.loads("\n".join(document))
    assert run["clusters_found"] == 0 and run["requested_by"].startswith("cli")
    stored = pipeline.db["consolidations"].find_one({"consolidation_id": consolidation_id})
    assert stored is not None and stored["requested_by"] == "ops:dana"
