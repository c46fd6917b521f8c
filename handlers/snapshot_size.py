"""A snapshot's size, turn by turn: its bytes in the log (`max_snapshot_bytes`) and its tokens,
estimated from the turns' text alone (`max_tokens`; docs/architecture.md, "Stages", the window).

The token estimate is a pure function of the text so that replaying the turns topic promotes
exactly the same snapshots: it never asks the model's tokenizer (which the window stage does not
load, and which changes with the model).

* text in ASCII counts one token per four characters;
* every other character counts one token;
* each turn adds `TURN_OVERHEAD_TOKENS` for its role and name markers in the prompt.

Against the packaged Qwen2.5 tokenizer (`python -m bench.token_estimate`,
`bench/results/token_estimate-2026-12-04.json`) the estimate over the real count is 1.06 for an
English chat paragraph, 1.00 for the English `docs/` pages, 1.56 for a Chinese chat paragraph:
close for English, on the large side for Chinese, so a budget is kept or undershot.

Changing these numbers changes which snapshots a replay promotes: they change only together with
`TOKEN_ESTIMATE_VERSION` and a CHANGELOG entry.
"""

from __future__ import annotations

import orjson

from events.sealed import sealed_text_json_bytes
from events.snapshots import SnapshotTurn

TOKEN_ESTIMATE_VERSION = 1
ASCII_CHARS_PER_TOKEN = 4
TURN_OVERHEAD_TOKENS = 4


def estimated_text_tokens(text: str) -> int:
    """The tokens `text` is estimated to take: ASCII characters by four, the others one each."""
    ascii_chars = len(text.encode("ascii", errors="ignore"))
    other_chars = len(text) - ascii_chars
    return -(-ascii_chars // ASCII_CHARS_PER_TOKEN) + other_chars


def turn_tokens(turn: SnapshotTurn) -> int:
    """The tokens `turn` is estimated to add to an extraction prompt: its text, its name, its
    role markers."""
    return TURN_OVERHEAD_TOKENS + estimated_text_tokens(turn.content + (turn.name or ""))


def snapshot_turn_bytes(turn: SnapshotTurn, *, sealed: bool = False) -> int:
    """The bytes one turn adds to an encoded snapshot (its JSON and a separating comma), with
    its `content` and `name` sealed when `sealed` (`handlers.sealed_events`)."""
    fields = turn.model_dump(mode="json")
    if not sealed:
        return len(orjson.dumps(fields)) + 1
    size = 0
    for name in ("content", "name"):
        if fields[name]:
            size += sealed_text_json_bytes(fields[name])
            fields[name] = ""  # its place in the JSON: two quotes, counted off below
            size -= 2
    return len(orjson.dumps(fields)) + size + 1
