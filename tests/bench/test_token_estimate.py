"""`python -m bench.token_estimate`: the window's token estimate against Qwen2.5's tokenizer."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from bench.token_estimate import main

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="needs the local extra (llama_cpp)"
)


def test_the_estimate_is_close_for_english_and_large_for_chinese(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert main(["--out", str(out)]) == 0
    ratios = {
        row["text"]: row["estimate_over_tokens"] for row in json.loads(out.read_text())["texts"]
    }
    assert 0.9 <= ratios["english chat"] <= 1.2
    assert ratios["chinese chat"] > 1.2
    assert min(ratios.values()) >= 0.9
