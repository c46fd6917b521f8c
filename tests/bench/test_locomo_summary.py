from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.locomo.summary import main, summarize


def scores(f1: float, tokens: float = 100.0) -> dict[str, Any]:
    return {
        "f1": f1,
        "mem0_f1": f1,
        "judged_correct": None,
        "prompt_tokens": tokens,
        "seconds": 1.0,
        "gold_in_context": 1.0,
    }


def report(
    conversation: str, ours: list[float], transcript: list[float] | None = None
) -> dict[str, Any]:
    questions = []
    for i, f1 in enumerate(ours):
        question: dict[str, Any] = {"category": 4, "memstream": scores(f1)}
        if transcript is not None:
            question["full_context"] = scores(transcript[i], tokens=400.0)
        questions.append(question)
    return {"samples": [{"sample_id": conversation, "sessions": 4, "questions": questions}]}


def test_each_conversation_is_set_against_the_transcript_of_its_own_run() -> None:
    summary = summarize([report("conv-1", [1.0, 0.0], transcript=[0.5, 0.5])])
    (row,) = summary["conversations"]
    assert row["f1"] == 0.5 and row["transcript_f1"] == 0.5 and row["f1_ratio"] == 1.0
    assert row["prompt_tokens_ratio"] == 0.25


def test_a_run_without_the_transcript_takes_it_from_another_report_of_the_conversation() -> None:
    summary = summarize(
        [report("conv-1", [1.0, 1.0])],
        transcripts=[report("conv-1", [0.0, 0.0], transcript=[0.5, 1.0])],
    )
    assert summary["conversations"][0]["transcript_f1"] == 0.75


def test_totals_weigh_every_question_alike() -> None:
    summary = summarize(
        [
            report("conv-1", [1.0], transcript=[1.0]),
            report("conv-2", [0.0, 0.0, 0.0], transcript=[0.5, 0.5, 0.5]),
        ]
    )
    total = summary["total"]
    assert total["questions"] == 4 and total["conversations"] == 2
    assert total["f1"] == 0.25 and total["transcript_f1"] == 0.625 and total["f1_ratio"] == 0.4


def test_answers_that_scored_higher_and_lower_than_before_are_counted() -> None:
    summary = summarize(
        [report("conv-1", [1.0, 0.0, 0.5])], befores=[report("conv-1", [0.5, 0.5, 0.5])]
    )
    row = summary["conversations"][0]
    assert (row["higher"], row["lower"], row["f1_before"]) == (1, 1, 0.5)


def test_a_transcript_of_other_questions_is_refused() -> None:
    with pytest.raises(ValueError, match="other questions"):
        summarize([report("conv-1", [1.0])], transcripts=[report("conv-1", [1, 1], [1, 1])])


def test_the_command_prints_a_table_and_writes_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, out = tmp_path / "run.json", tmp_path / "summary.json"
    path.write_text(json.dumps(report("conv-1", [0.5], transcript=[1.0])))
    assert main([str(path), "--out", str(out)]) == 0
    assert "| conv-1 (1) | 0.500 | 1.000 | 0.50x | 100 (0.25x) |" in capsys.readouterr().out
    assert out.exists()


def test_a_conversation_in_two_reports_counts_once_from_the_last() -> None:
    summary = summarize(
        [
            report("conv-1", [0.0], transcript=[1.0]),
            report("conv-2", [1.0], transcript=[1.0]),
            report("conv-1", [1.0], transcript=[1.0]),
        ]
    )
    assert [row["conversation"] for row in summary["conversations"]] == ["conv-1", "conv-2"]
    assert summary["conversations"][0]["f1"] == 1.0
    assert summary["total"]["questions"] == 2 and summary["total"]["f1"] == 1.0
