"""The past-message recall evaluation: each turn matched with the one before it in its session,
evidence counted per question, and a report of every ranking at every limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.locomo.dataset import SYNTHETIC, evidence_ids, load
from bench.locomo.recall_eval import main, measured, past_messages, recalled
from bench.locomo.scoring import scored


def test_every_turn_but_a_sessions_first_carries_the_text_said_before_it() -> None:
    sample = load(SYNTHETIC)[0]
    turned = past_messages(sample)
    for session in sample.sessions:
        turns = [t for t in session.turns if t.content.strip()]
        mine = [t for t in turned if t.dia_id in {turn.dia_id for turn in turns}]
        assert [t.message.before for t in mine] == ["", *(t.content for t in turns[:-1])]
        assert {t.message.said_on for t in mine} == {session.at.date()}


def test_a_ranking_that_recalls_every_turn_finds_every_evidence_turn() -> None:
    sample = load(SYNTHETIC)[0]
    everything = measured(sample, lambda query, messages, limit: list(messages), 0)
    questions = [qa for qa in scored(sample.qa) if evidence_ids(qa)]
    assert everything["questions"] == everything["questions_with_evidence_recalled"]
    assert everything["evidence_recalled"] == everything["evidence_turns"]
    assert everything["evidence_turns"] == sum(len(evidence_ids(qa)) for qa in questions)
    nothing = measured(sample, recalled, 0)
    assert nothing["evidence_recalled"] == 0 and nothing["chars"] == 0


def test_the_report_gives_each_ranking_at_each_limit_and_leaves_out_excluded_conversations(
    tmp_path: Path,
) -> None:
    out = tmp_path / "recall.json"
    sample_id = load(SYNTHETIC)[0].sample_id
    assert main(["--data", str(SYNTHETIC), "--limits", "2,6", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report["rankings"]) == {
        f"{name}@{limit}"
        for name in ("keywords", "stop_words", "as_built", "meaning")
        for limit in (2, 6)
    }
    overall = report["rankings"]["as_built@6"]["overall"]
    assert 0 <= overall["evidence"] <= 1 and overall["questions"] > 0
    with pytest.raises(SystemExit):
        main(["--data", str(SYNTHETIC), "--exclude", sample_id])
