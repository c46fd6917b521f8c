"""`memstream rollback`: arguments refused before anything is sent; against a running pipeline,
a restore with `--wait`, history showing it, a refusal and an unknown memory."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from memstream.cli.rollback import refusal
from tests.memstream.cli.test_memories import memstream
from tests.support.pipeline import PipelineHarness, eventually

BEES = "The user keeps bees in a small wooden hive behind the old family house."
WASPS = "The user keeps wasps in a small wooden hive behind the old family house."


def arguments(**overrides: Any) -> argparse.Namespace:
    fields: dict[str, Any] = {"to_version": 1, "by": "ops:dana", "reason": ""}
    fields.update(overrides)
    return argparse.Namespace(**fields)


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        ({}, None),
        ({"to_version": 0}, "--to-version"),
        ({"by": "  "}, "--by"),
        ({"reason": "x" * 1001}, "--reason"),
    ],
)
def test_arguments_are_checked_before_anything_is_sent(
    overrides: dict[str, Any], refused: str | None
) -> None:
    said = refusal(arguments(**overrides))
    assert said == refused if refused is None else (said is not None and refused in said)


@pytest.mark.integration
def test_the_cli_rolls_back_a_memory_and_history_shows_who_and_why(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory()
    pipeline.llm.on(
        f"NEW: {WASPS}", {"contradicts": 1, "action": "UPDATE", "existing": 1}, scope="last_user"
    )
    pipeline.save("dana", "semantic", BEES)
    (first,) = eventually(
        lambda: pipeline.memories(user_id="dana"), lambda m: len(m) == 1, what="v1"
    )
    pipeline.save("dana", "semantic", WASPS)
    eventually(lambda: pipeline.memories(user_id="dana"), lambda m: len(m) == 2, what="v2")
    memory_id = first["memory_id"]
    common = ("rollback", "--user", "dana", "--memory", memory_id, "--by", "ops:dana")

    restored = memstream(pipeline, *common, "--to-version", "1", "--reason", "typo", "--wait")
    assert restored.returncode == 0, restored.stderr
    rollback_id, *result = restored.stdout.splitlines()
    decided = json.loads("\n".join(result))
    assert (decided["rollback_id"], decided["versions"]) == (rollback_id, [3])

    history = memstream(pipeline, "history", "--user", "dana", memory_id)
    last = history.stdout.strip().splitlines()[-1]
    assert last == (f"[semantic] v3 {BEES}  ({memory_id})  [rollback to v1 by ops:dana: typo]")

    refused = memstream(pipeline, *common, "--to-version", "9", "--wait")
    assert refused.returncode == 1
    assert "has no version 9" in refused.stdout

    unknown = memstream(
        pipeline, "rollback", "--user", "dana", "--memory", "nope", "--to-version", "1", "--by", "x"
    )
    assert unknown.returncode == 1 and "no memory 'nope'" in unknown.stderr
