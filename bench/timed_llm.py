"""An LLM endpoint for benchmarks that times every request, in its own process.

    python -m bench.timed_llm --port 8100 --timings /tmp/t.jsonl --chat-delay 0.5

It is the scripted server of the tests (`tests.support.scripted_llm`) answering every semantic
extraction with one fact built from the session's token (`TOKEN`, e.g. ``zq1f2e3d4c``: "The
user's locker code is zq1f2e3d4c.") after ``--chat-delay`` seconds (a stand-in for a model's
time). While a file `UPSTREAM_FILE` lies beside the timings file (`TimedLLMServer.forwarding`),
chat requests are forwarded to the real server it names instead (the local llama.cpp model);
embeddings stay scripted. Every request is appended to ``--timings`` as one JSON line:
``{"kind", "start", "end", "token"}``, the times from ``time.monotonic()`` (one clock for every
process of the machine, so the benchmark compares them with its own).

It runs as a child process so that its memory is measured apart from the benchmark's (the
footprint suite) and its threads do not share the benchmark's interpreter lock.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from memstream.runtime.servers import LoopbackServer

UPSTREAM_FILE = "upstream.json"
"""Present beside the timings file: chat requests are forwarded to the real server it names."""

TOKEN = re.compile(r"\bzq[0-9a-f]{8}\b")
"""A session's marker: the benchmark puts one in each session's turns; it reappears in the
extraction prompt, the extracted memory and its embedding request."""


def token_in(body: Mapping[str, Any]) -> str | None:
    """The first session token anywhere in a request body (chat messages, embedding input)."""
    found = TOKEN.search(json.dumps(body, ensure_ascii=False))
    return found.group(0) if found else None


def fact_statement(token: str, index: int) -> str:
    """The `index`-th fact about a session: resting on its first turn ("My locker code is …"),
    different from every other fact (the extractor keeps one fact per distinct text)."""
    if index == 0:
        return f"The user's locker code is {token}."
    return f"The user's locker number {index} has the code {token}."


def locker_facts(token: str | None, count: int = 1) -> dict[str, Any]:
    """A semantic extraction answer: `count` facts about the session `token` marks (none
    without a token)."""
    if token is None:
        return {"facts": []}
    return {
        "facts": [
            {
                "subject": "the user",
                "statement": fact_statement(token, index),
                "owner": "user",
                "category": "personal",
            }
            for index in range(count)
        ]
    }


def fact_answer(body: Mapping[str, Any]) -> dict[str, Any]:
    """The scripted semantic extraction answer: one fact carrying the session's token (none
    for a request without one)."""
    return locker_facts(token_in(body))


def read_timings(path: Path) -> list[dict[str, Any]]:
    """The request records written so far (a half-written last line is left for later)."""
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


def busy_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """How long at least one of the (start, end) intervals was open (overlaps counted once)."""
    total = 0.0
    open_start: float | None = None
    open_end = 0.0
    for start, end in sorted(intervals):
        if open_start is None or start > open_end:
            if open_start is not None:
                total += open_end - open_start
            open_start, open_end = start, end
        else:
            open_end = max(open_end, end)
    if open_start is not None:
        total += open_end - open_start
    return total


def llm_seconds(
    entries: Sequence[Mapping[str, Any]], token: str, kinds: Sequence[str] = ("chat", "embeddings")
) -> float:
    """Seconds spent inside the LLM server's requests about one session (`token`)."""
    return busy_seconds(
        (float(e["start"]), float(e["end"]))
        for e in entries
        if e.get("token") == token and e.get("kind") in kinds
    )


class _Recorder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def record(self, kind: str, started: float, body: Mapping[str, Any]) -> None:
        line = json.dumps(
            {"kind": kind, "start": started, "end": time.monotonic(), "token": token_in(body)}
        )
        with self._lock, self.path.open("a") as out:
            out.write(line + "\n")


def _forwarded(upstream: Mapping[str, Any], body: dict[str, Any]) -> tuple[int, Any]:
    """A chat request answered by the real server `upstream` ({"url", "model"})."""
    request = urllib.request.Request(
        str(upstream["url"]).rstrip("/") + "/chat/completions",
        data=json.dumps({**body, "model": upstream["model"]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=900) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def _serve(recorder: _Recorder, chat_delay: float, embed_delay: float, port: int) -> None:
    from tests.support.scripted_llm import ScriptedLLM

    switch = recorder.path.with_name(UPSTREAM_FILE)

    class TimedScriptedLLM(ScriptedLLM):
        def chat_completion(self, body: dict[str, Any]) -> tuple[int, Any]:
            started = time.monotonic()
            try:
                if switch.exists():
                    return _forwarded(json.loads(switch.read_text()), body)
                time.sleep(chat_delay)
                return super().chat_completion(body)
            finally:
                recorder.record("chat", started, body)

        def embeddings(self, body: dict[str, Any]) -> tuple[int, Any]:
            started = time.monotonic()
            time.sleep(embed_delay)
            try:
                return super().embeddings(body)
            finally:
                recorder.record("embeddings", started, body)

    TimedScriptedLLM(default=fact_answer, port=port).start()
    threading.Event().wait()


class TimedLLMServer(LoopbackServer):
    """`python -m bench.timed_llm` as a child process (see the module doc)."""

    name = "timed-llm"
    startup_timeout_default = 60.0

    def __init__(
        self,
        workdir: Path,
        *,
        chat_delay: float = 0.0,
        embed_delay: float = 0.0,
        python: str | None = None,
    ) -> None:
        super().__init__(workdir)
        self.timings = self.workdir / "timings.jsonl"
        self.chat_delay = chat_delay
        self.embed_delay = embed_delay
        self._python = python or sys.executable

    @property
    def base_url(self) -> str:
        return f"http://{self.address}/v1"

    def entries(self) -> list[dict[str, Any]]:
        return read_timings(self.timings)

    def _command(self) -> list[str]:
        return [
            *(self._python, "-m", "bench.timed_llm", "--port", str(self.port)),
            *("--timings", str(self.timings), "--chat-delay", str(self.chat_delay)),
            *("--embed-delay", str(self.embed_delay)),
        ]

    @contextlib.contextmanager
    def forwarding(self, url: str, model: str) -> Iterator[None]:
        """Chat requests go to the real server at `url` (as `model`) while inside."""
        switch = self.timings.with_name(UPSTREAM_FILE)
        switch.write_text(json.dumps({"url": url, "model": model}))
        try:
            yield
        finally:
            switch.unlink(missing_ok=True)

    def _env(self) -> Mapping[str, str]:
        # The child imports bench and tests from the checkout this benchmark runs from.
        root = str(Path(__file__).resolve().parent.parent)
        path = os.environ.get("PYTHONPATH")
        return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}

    def _is_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError, ValueError):
            return False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--timings", type=Path, required=True)
    parser.add_argument("--chat-delay", type=float, default=0.0)
    parser.add_argument("--embed-delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    _serve(_Recorder(args.timings), args.chat_delay, args.embed_delay, args.port)


if __name__ == "__main__":
    main()
