"""`memstream dlq` on the real pipeline: poison is listed, shown, redriven after a fix and
processed; still-poison input is dead-lettered again under a new id and never loops."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memstream.cli.dlq import letter, letters, redrive
from memstream.cli.main import main
from tests.support.pipeline import PipelineHarness, eventually, produce_raw

pytestmark = pytest.mark.integration

STRIPE_FACTS = {
    "facts": [
        {
            "subject": "the user",
            "statement": "The user works at Stripe.",
            "owner": "user",
            "category": "work",
        }
    ]
}


def test_dead_letters_are_listed_shown_and_redriven_after_a_fix(
    pipeline_factory: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline: PipelineHarness = pipeline_factory()
    # The LLM answers garbage for as many attempts as the stage makes, then properly (the "fix").
    pipeline.llm.on("Stripe", "this is not json", times=pipeline.settings.llm.max_attempts)
    pipeline.llm.on("Stripe", STRIPE_FACTS, scope="last_user")
    kafka = pipeline.settings.kafka
    asyncio.run(
        produce_raw(kafka.bootstrap_servers or "", kafka.topics.turns, [(b"eve|s", b"nope", 0)])
    )
    pipeline.record("fay", "s", [{"role": "user", "content": "I work at Stripe."}])
    pipeline.flush("fay", "s")
    found = eventually(
        lambda: letters(pipeline.db),
        lambda d: {x["stage"] for x in d} == {"window", "extract-semantic"},
        what="the poison turn's and the garbage answer's letters",
    )
    assert len(found) == 2, found
    by_stage = {document["stage"]: document for document in found}
    garbage, poison = by_stage["extract-semantic"], by_stage["window"]
    assert "invalid LLM output" in garbage["reason"] and "not JSON" in poison["reason"]
    assert poison["record_key"] == "eve|s" and poison["payload"] == "nope"

    for name, value in pipeline.environment.items():
        monkeypatch.setenv(name, value)
    assert main(["dlq", "list", "--stage", "window"]) == 0
    listed = capsys.readouterr().out
    assert poison["_id"] in listed and garbage["_id"] not in listed and "not JSON" in listed
    assert main(["dlq", "show", garbage["_id"][:12]]) == 0
    shown = capsys.readouterr().out
    assert "invalid LLM output" in shown and "fay" in shown and "snapshots" in shown

    # Redrive the snapshot the LLM failed on: the fixed LLM answers, the memory appears.
    (sent,) = redrive(pipeline.settings, pipeline.db, wanted=garbage["_id"])
    assert sent.action == "sent", sent
    (memory,) = eventually(
        lambda: pipeline.memories(user_id="fay"), lambda m: len(m) == 1, what="the memory"
    )
    assert memory["text"] == "The user works at Stripe."
    (snapshot,) = pipeline.snapshots(user_id="fay")
    assert snapshot["extractions"]["semantic"]["failure"] is None
    eventually(
        lambda: letter(pipeline.db, garbage["_id"]).get("redrives", []),
        lambda r: len(r) == 1,
        what="the redrive noted on the letter",
    )
    (again,) = redrive(pipeline.settings, pipeline.db, wanted=garbage["_id"])
    assert again.action == "skipped" and "already redriven" in again.detail

    # Redrive the still-poison turn: dead-lettered again under a new id, pointing at the first.
    (sent,) = redrive(pipeline.settings, pipeline.db, wanted=poison["_id"])
    assert sent.action == "sent", sent
    failed_again = eventually(
        lambda: letters(pipeline.db, stage="window"),
        lambda d: len(d) == 2,
        what="the redriven poison dead-lettered again",
    )
    (retry,) = [d for d in failed_again if d["_id"] != poison["_id"]]
    assert retry["redrive_of"] == poison["_id"] and retry["payload"] == "nope"
    eventually(
        lambda: letter(pipeline.db, poison["_id"]).get("redrives", []),
        lambda r: len(r) == 1,
        what="the poison's redrive noted",
    )
    # `--all` sends nothing more: one letter already redriven each, the other a failed redrive.
    outcomes = redrive(pipeline.settings, pipeline.db, every=True)
    assert {o.action for o in outcomes} == {"skipped"} and len(outcomes) == 3
    assert main(["dlq", "redrive", "--all", "--dry-run"]) == 0
    time_to_settle = eventually(lambda: letters(pipeline.db), lambda d: len(d) == 3, what="3")
    assert len(time_to_settle) == 3
    assert len(pipeline.memories(user_id="fay")) == 1
