"""llama.cpp's own timings of each request, read from the local server's log.

llama-cpp-python's server does not put llama.cpp's ``timings`` in its answers (the C++
``llama-server`` does), but with ``verbose`` on (its default) it prints llama.cpp's performance
counters to its log after every completion::

    llama_perf_context_print: prompt eval time =     812.34 ms /   301 tokens (...)
    llama_perf_context_print:        eval time =    1503.90 ms /    41 runs   (...)
    llama_perf_context_print:       total time =    2371.05 ms /   342 tokens

Requests to the server run one at a time, so the lines a request adds to the log are its own.
`LogCursor` reads what was added since the last read; `parse_timings` sums the counters found.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

LLAMA_LOCK = Path(os.environ.get("MEMSTREAM_LLAMA_LOCK", "/tmp/memstream-llama.lock"))
"""Held while a llama.cpp server runs: never two models at once on a shared machine (the same
lock as `flock /tmp/memstream-llama.lock …`; `MEMSTREAM_LLAMA_LOCK` moves it)."""
"""Held while a model server runs: never two on this machine at once."""

_LINE = re.compile(
    r"^\S*perf_context_print:\s+(?P<what>prompt eval|eval|total) time =\s+(?P<ms>[\d.]+) ms"
    r"\s*/\s*(?P<count>\d+)",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Timings:
    """Milliseconds llama.cpp spent evaluating the prompt and generating, and token counts."""

    prompt_ms: float = 0.0
    prompt_tokens: int = 0
    eval_ms: float = 0.0
    eval_tokens: int = 0
    total_ms: float = 0.0
    completions: int = 0

    def __add__(self, other: Timings) -> Timings:
        return Timings(
            self.prompt_ms + other.prompt_ms,
            self.prompt_tokens + other.prompt_tokens,
            self.eval_ms + other.eval_ms,
            self.eval_tokens + other.eval_tokens,
            self.total_ms + other.total_ms,
            self.completions + other.completions,
        )


def parse_timings(text: str) -> Timings:
    """The sum of every completion's counters in `text` (a piece of the server's log)."""
    total = Timings()
    for block in text.split("prompt eval time")[1:]:
        found = {
            m["what"]: m for m in _LINE.finditer("perf_context_print: prompt eval time" + block)
        }
        prompt, generated, whole = found.get("prompt eval"), found.get("eval"), found.get("total")
        total = total + Timings(
            float(prompt["ms"]) if prompt else 0.0,
            int(prompt["count"]) if prompt else 0,
            float(generated["ms"]) if generated else 0.0,
            int(generated["count"]) if generated else 0,
            float(whole["ms"]) if whole else 0.0,
            1,
        )
    return total


class LogCursor:
    """What a log file gained since the last `read()`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def read(self) -> str:
        with self.path.open("rb") as log:
            log.seek(self.offset)
            data = log.read()
        self.offset += len(data)
        return data.decode(errors="replace")


@contextmanager
def llama_lock(path: Path | None = None) -> Iterator[None]:
    """Hold the machine's model-server lock (waits for another holder to finish)."""
    fd = os.open(path or LLAMA_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
