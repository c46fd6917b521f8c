"""The README's examples run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.pipeline import PipelineHarness

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example(name: str) -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"<!-- readme-example: {name} -->\n```python\n(.*?)```", text, re.DOTALL)
    assert match, f"README has no example {name!r}"
    return match.group(1)


@pytest.mark.integration
def test_sdk_example_prints_the_memory(pipeline_factory: Any) -> None:
    pipeline: PipelineHarness = pipeline_factory()
    pipeline.llm.on(
        "Lisbon",
        {
            "facts": [
                {
                    "subject": "the user",
                    "statement": "The user lives in Lisbon.",
                    "owner": "user",
                    "category": "basic_info",
                    "profile_field": "location",
                },
            ]
        },
        scope="last_user",
    )
    result = subprocess.run(
        [sys.executable, "-c", readme_example("sdk")],
        env={**os.environ, **pipeline.environment},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "the user | user | The user lives in Lisbon."


def test_readme_commands_exist() -> None:
    text = README.read_text(encoding="utf-8")
    for script in re.findall(r"bash (scripts/\S+\.sh)", text):
        assert (README.parent / script).is_file(), script
    ci = (README.parent / ".ci" / "run").read_text()
    assert "scripts/test.sh" in ci, ".ci/run must run the README's test command"
