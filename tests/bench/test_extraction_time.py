"""The extraction-time suite's pure parts: its snapshots, requests, order and summary."""

from __future__ import annotations

from typing import Any

import pytest

from bench.cost_conversation import SESSIONS
from bench.suites.extraction_time import (
    SIDES,
    bare_body,
    shares_system_prompt,
    sides_for,
    summary,
    window_snapshot,
)
from handlers.extraction.registry import extractor_for


def test_window_snapshot_holds_the_first_twenty_turns_of_the_session() -> None:
    snapshot = window_snapshot(SESSIONS[0])

    assert len(snapshot.turns) == 20
    assert snapshot.turns[0].content == SESSIONS[0].exchanges[0].user
    assert [t.role for t in snapshot.turns[:2]] == ["user", "assistant"]


def test_bare_body_is_the_request_the_stage_sends() -> None:
    messages = extractor_for("semantic").prompt(window_snapshot(SESSIONS[0]))

    assert bare_body("m", messages) == {
        "model": "m",
        "messages": messages,
        "response_format": {"type": "json_object"},
        "temperature": 0,
        "max_tokens": 1024,
    }


def test_every_side_runs_first_in_turn() -> None:
    assert [sides_for(i)[0] for i in range(3)] == list(SIDES)
    assert all(sorted(sides_for(i)) == sorted(SIDES) for i in range(5))


def test_the_same_type_asked_twice_in_a_row_would_reuse_its_system_prompt() -> None:
    snapshot = window_snapshot(SESSIONS[0])
    semantic = extractor_for("semantic").prompt(snapshot)
    episodic = extractor_for("episodic").prompt(snapshot)

    assert shares_system_prompt(semantic, extractor_for("semantic").prompt(snapshot))
    assert not shares_system_prompt(semantic, episodic)
    assert not shares_system_prompt([], semantic)


def _row(snapshot: str, side: str, seconds: float) -> dict[str, Any]:
    return {"memory_type": "semantic", "snapshot": snapshot, "side": side, "seconds": seconds}


def test_summary_splits_the_bare_request_into_prompt_and_generation() -> None:
    rows = [
        {**_row("a", "stage", 10.5), "calls": 1},
        _row("a", "bare", 10.0),
        _row("a", "probe", 4.0),
        {**_row("b", "stage", 20.5), "calls": 2},
        _row("b", "bare", 20.0),
        _row("b", "probe", 6.0),
    ]

    found = summary(rows, "semantic")

    assert found["snapshots"] == 2
    assert found["stage_seconds"] == pytest.approx(15.5)
    assert found["bare_seconds"] == pytest.approx(15.0)
    assert found["prompt_seconds"] == pytest.approx(5.0)
    assert found["generation_seconds"] == pytest.approx(10.0)
    assert found["prompt_share"] == pytest.approx(10 / 30)
    assert found["generation_share"] == pytest.approx(20 / 30)
    assert found["stage_overhead_seconds"] == pytest.approx(0.5)
    assert found["stage_calls"] == 3
