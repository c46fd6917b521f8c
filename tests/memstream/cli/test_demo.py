"""`memstream demo`, the README's first command, end to end on the embedded default.

The LLM is the scripted server (answers below, told apart by each type's system prompt); the
broker, the database and the embedder are the embedded defaults, so reconciliation runs with the
default thresholds on the local embedder's vectors: the move to Porto is asked about (the LLM
answers UPDATE), the restated taste is identical and reinforced without asking.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.extraction_requests import EMPTY_ANSWERS, asked
from tests.support.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.integration


def about_user(*statements: str) -> dict[str, Any]:
    return {
        "facts": [
            {"subject": "the user", "statement": s, "owner": "user", "category": "basic_info"}
            for s in statements
        ]
    }


def script(llm: ScriptedLLM) -> None:
    first, second = "work as a data engineer at Stripe", "I moved from Lisbon to Porto"
    llm.on(
        asked("semantic", first),
        about_user(
            "The user lives in Lisbon.",
            "The user works as a data engineer at Stripe.",
            "The user loves strong espresso.",
            "The user is allergic to peanuts.",
        ),
    )
    llm.on(
        asked("procedural", first),
        {
            "procedures": [
                {
                    "kind": "rule",
                    "trigger": "always",
                    "steps": ["Keep answers short"],
                    "applies_to": "the user",
                    "given_by": "the user",
                }
            ]
        },
    )
    llm.on(
        asked("semantic", second),
        about_user("The user lives in Porto.", "The user loves strong espresso."),
    )
    llm.on(
        lambda text: (
            "NEW: The user lives in Porto." in text and "1. The user lives in Lisbon." in text
        ),
        {"contradicts": 1, "action": "UPDATE", "existing": 1, "reason": "moved to Porto"},
    )
    for memory_type, empty in EMPTY_ANSWERS.items():
        llm.on(asked(memory_type, ""), empty)
    llm.on("NEW:", {"action": "ADD", "existing": None, "reason": "a different fact"})


def test_the_demo_shows_an_update_and_a_reinforcement_on_the_embedded_default(
    tmp_path: Path,
) -> None:
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "MEMSTREAM_", "KAFKA_", "MONGODB_", "MONGOMEM_"))
    }
    with ScriptedLLM() as llm:
        script(llm)
        result = subprocess.run(
            [sys.executable, "-m", "memstream", "demo", "--timeout", "300"],
            env={
                **environment,
                "OPENAI_BASE_URL": llm.base_url,
                "OPENAI_API_KEY": "test",
                "MEMSTREAM_LLM_MODEL": llm.model,
            },
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "The user lives in Porto.  <- UPDATED from 'The user lives in Lisbon.'" in out
    assert "The user loves strong espresso.  <- REINFORCED 1x" in out
    assert "[procedural]" in out and "Keep answers short" in out
