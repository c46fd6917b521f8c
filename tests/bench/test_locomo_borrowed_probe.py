"""The borrowed-words probe: memories of a run's report judged again against their conversation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.locomo.borrowed_probe import main

SYNTHETIC = Path(__file__).parents[2] / "bench" / "locomo" / "synthetic.json"


def report(*memories: str) -> dict[str, Any]:
    return {"samples": [{"sample_id": "synthetic-1", "sessions": 3, "memory_texts": memories}]}


def totals(tmp_path: Path, data: dict[str, Any], exclude: str = "") -> dict[str, int]:
    """The probe's totals over a report of `data` (the exit status checked)."""
    path, out = tmp_path / "report.json", tmp_path / "counts.json"
    path.write_text(json.dumps(data))
    assert main([str(path), "--data", str(SYNTHETIC), "--exclude", exclude, "--out", str(out)]) == 0
    totals: dict[str, int] = json.loads(out.read_text())["total"]
    return totals


def test_a_users_memory_in_the_other_speakers_words_is_counted_as_moved(tmp_path: Path) -> None:
    """Maya is the user; Jonas got into the master's programme in Lisbon, Maya adopted Pepper."""
    data = report(
        "The user got accepted into a master's program in urban planning.",
        "The user adopted a rescue dog named Pepper last weekend.",
        "The user got accepted into a master's program in urban planning.",
    )
    assert totals(tmp_path, data) == {
        "memories": 2,
        "moved": 1,
        "dropped": 0,
        "names_the_user_as_another": 0,
    }


def test_excluded_conversations_are_not_read(tmp_path: Path) -> None:
    data = report("The user got accepted into a master's program.")
    assert totals(tmp_path, data, exclude="synthetic-1") == {
        "memories": 0,
        "moved": 0,
        "dropped": 0,
        "names_the_user_as_another": 0,
    }


def test_episodes_are_left_out_when_the_report_lists_memory_types(tmp_path: Path) -> None:
    """The rule judges facts only."""
    borrowed = "The user got accepted into a master's program in urban planning."
    data = report(borrowed, borrowed + " They celebrated.")
    data["samples"][0]["memory_types"] = ["episodic", "semantic"]
    assert totals(tmp_path, data) == {
        "memories": 1,
        "moved": 1,
        "dropped": 0,
        "names_the_user_as_another": 0,
    }


def test_a_memory_naming_the_user_again_is_counted(tmp_path: Path) -> None:
    """Maya is the user."""
    data = report("The user is a running partner of Maya's sister.")
    assert totals(tmp_path, data)["names_the_user_as_another"] == 1
