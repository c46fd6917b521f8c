"""A stub OpenAI-compatible LLM for the scale benchmarks: every answer after exactly `delay`
seconds, as many at once as are asked, each one counted.

    python -m bench.stub_llm --port 8100 [--chat-delay 1.0] [--embed-delay 0] [--facts 1]

An asyncio server (aiohttp, a Faust dependency) in its own process, so that a thousand requests
sleeping at once cost it nothing and its work does not share the benchmark's interpreter lock.
It stands for a hosted model that serves hundreds of requests at once: what it measures is how
many calls the pipeline keeps in flight, not how fast a model is.

* ``POST /v1/chat/completions``: recognises each memory type's extraction prompt by the opening
  of its system prompt (`tests.support.extraction_requests.OPENINGS`) and answers validly:
  semantic with ``facts`` facts about the session's token (`bench.timed_llm.TOKEN`, a
  ``zq…`` marker the benchmark puts in each session's first turn: "The user's locker code is
  zq1f2e3d4c."), the other types with nothing; a reconciliation question with ADD. Any other
  prompt gets ``{}`` and is counted as ``unknown``.
* ``POST /v1/embeddings``: a pseudo-random unit vector per text, seeded by the text (identical
  texts, identical vectors; any two others nearly orthogonal in 384 dimensions, so every new
  fact is ADDed without a reconciliation question). ``float`` and ``base64`` encodings.
* ``GET /v1/models``.
* ``GET /stub/stats``: requests per kind, the largest number in flight at once (chat, and all
  kinds), and the first start and last end (``time.monotonic()``, one clock for every process
  of the machine) since the last reset; ``POST /stub/reset``; ``POST /stub/config`` with
  ``{"chat_delay": s, "embed_delay": s, "facts": n}`` (any of them); ``GET /stub/requests``:
  the chat and embeddings bodies received since the last reset (the bare client sends them
  again, `bench.scale_extraction.bare_client`).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import random
import struct
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.timed_llm import TOKEN, locker_facts
from memstream.runtime.servers import LoopbackServer
from tests.support.extraction_requests import EMPTY_ANSWERS, OPENINGS
from tests.support.reconcile_requests import answer, decision, is_reconciliation, questions

DIMENSIONS = 384
"""The embedding size of the local model (and of the projection workload's vectors)."""
KINDS = ("chat", "embeddings")
Body = Mapping[str, Any]


# ---- answers (pure) -----------------------------------------------------------------------------


def asked_about(body: Body) -> str:
    """What a chat request asks: a memory type's extraction, ``reconcile`` or ``unknown``."""
    messages = body.get("messages") or []
    system = str(messages[0].get("content") or "") if messages else ""
    if is_reconciliation(system):
        return "reconcile"
    for memory_type, opening in OPENINGS.items():
        if system.startswith(opening):
            return memory_type
    return "unknown"


def session_token(body: Body) -> str | None:
    """The session marker in the request's conversation (its last message), if any."""
    messages = body.get("messages") or []
    found = TOKEN.search(str(messages[-1].get("content") or "")) if messages else None
    return found.group(0) if found else None


def chat_answer(body: Body, facts: int) -> dict[str, Any]:
    """The JSON answer to a chat request (see the module doc)."""
    asked = asked_about(body)
    if asked == "reconcile":
        question = str(body["messages"][-1].get("content") or "")
        adds = [decision("ADD", None, "new information") for _ in questions(question)]
        return answer(question, adds)
    if asked == "semantic":
        return locker_facts(session_token(body), facts)
    if asked in EMPTY_ANSWERS:
        return dict(EMPTY_ANSWERS[asked])
    return {}


def embedding(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """A unit vector drawn from a generator seeded by the text."""
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    rng = random.Random(seed)
    values = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


def embedding_texts(body: Body) -> list[str]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list):
        return [x if isinstance(x, str) else json.dumps(x) for x in raw]
    raise ValueError("'input' must be a string or a list")


def embeddings_answer(body: Body, dimensions: int = DIMENSIONS) -> dict[str, Any]:
    texts = embedding_texts(body)
    size = int(body.get("dimensions") or dimensions)
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(texts):
        vector = embedding(text, size)
        encoded: Any = (
            base64.b64encode(struct.pack(f"<{size}f", *vector)).decode() if as_base64 else vector
        )
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    words = sum(len(text.split()) for text in texts)
    return {
        "object": "list",
        "data": data,
        "model": body.get("model") or "stub-embedding",
        "usage": {"prompt_tokens": words, "total_tokens": words},
    }


def completion(body: Body, content: str, number: int) -> dict[str, Any]:
    prompt_words = sum(len(str(m.get("content") or "").split()) for m in body.get("messages") or [])
    completion_words = len(content.split())
    return {
        "id": f"chatcmpl-stub-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or "stub-llm",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_words,
            "completion_tokens": completion_words,
            "total_tokens": prompt_words + completion_words,
        },
    }


# ---- counting (pure) ----------------------------------------------------------------------------


@dataclass
class Tally:
    """Requests per kind and how many were in flight at once, since the last reset."""

    requests: dict[str, int] = field(default_factory=dict)
    """Per kind: ``chat``, ``embeddings``, and per chat subject (``chat:semantic`` …)."""
    in_flight: dict[str, int] = field(default_factory=dict)
    max_in_flight: dict[str, int] = field(default_factory=dict)
    first_start: float | None = None
    last_end: float | None = None

    def begin(self, kind: str, subject: str | None = None, now: float | None = None) -> None:
        self.requests[kind] = self.requests.get(kind, 0) + 1
        if subject is not None:
            self.requests[f"{kind}:{subject}"] = self.requests.get(f"{kind}:{subject}", 0) + 1
        for name in (kind, "all"):
            self.in_flight[name] = self.in_flight.get(name, 0) + 1
            self.max_in_flight[name] = max(self.max_in_flight.get(name, 0), self.in_flight[name])
        if self.first_start is None:
            self.first_start = time.monotonic() if now is None else now

    def end(self, kind: str, now: float | None = None) -> None:
        for name in (kind, "all"):
            self.in_flight[name] = self.in_flight.get(name, 0) - 1
        self.last_end = time.monotonic() if now is None else now

    def reset(self) -> None:
        """Forget the counts; requests still in flight stay counted as in flight."""
        self.requests = {}
        self.max_in_flight = {name: value for name, value in self.in_flight.items() if value}
        self.first_start = None
        self.last_end = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StubConfig:
    chat_delay: float = 1.0
    embed_delay: float = 0.0
    facts: int = 1

    def update(self, changes: Mapping[str, Any]) -> None:
        for name in ("chat_delay", "embed_delay"):
            if name in changes:
                setattr(self, name, float(changes[name]))
        if "facts" in changes:
            self.facts = int(changes["facts"])


# ---- the server ---------------------------------------------------------------------------------


def make_app(config: StubConfig) -> Any:
    """The aiohttp application (imported here: the pure parts above need no aiohttp)."""
    from aiohttp import web

    tally = Tally()
    bodies: dict[str, list[Any]] = {kind: [] for kind in KINDS}
    numbers = iter(range(1, 1 << 62))

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        subject = asked_about(body)
        tally.begin("chat", subject)
        bodies["chat"].append(body)
        try:
            await asyncio.sleep(config.chat_delay)
            content = json.dumps(chat_answer(body, config.facts))
            return web.json_response(completion(body, content, next(numbers)))
        finally:
            tally.end("chat")

    async def embeddings(request: web.Request) -> web.Response:
        body = await request.json()
        tally.begin("embeddings")
        bodies["embeddings"].append(body)
        try:
            if config.embed_delay:
                await asyncio.sleep(config.embed_delay)
            try:
                answer = embeddings_answer(body)
            except ValueError as error:
                return web.json_response({"error": {"message": str(error)}}, status=400)
            return web.json_response(answer)
        finally:
            tally.end("embeddings")

    async def models(_: web.Request) -> web.Response:
        names = ("stub-llm", "stub-embedding")
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "bench"} for n in names]
        return web.json_response({"object": "list", "data": data})

    async def stats(_: web.Request) -> web.Response:
        return web.json_response({**tally.to_json(), "config": asdict(config)})

    async def reset(_: web.Request) -> web.Response:
        tally.reset()
        for kept in bodies.values():
            kept.clear()
        return web.json_response({"reset": True})

    async def configure(request: web.Request) -> web.Response:
        config.update(await request.json())
        return web.json_response(asdict(config))

    async def requests(_: web.Request) -> web.Response:
        return web.json_response(bodies)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/stub/stats", stats)
    app.router.add_post("/stub/reset", reset)
    app.router.add_post("/stub/config", configure)
    app.router.add_get("/stub/requests", requests)
    return app


class StubLLMServer(LoopbackServer):
    """`python -m bench.stub_llm` as a child process (see the module doc)."""

    name = "stub-llm"
    startup_timeout_default = 60.0

    def __init__(
        self,
        workdir: Path,
        *,
        chat_delay: float = 1.0,
        embed_delay: float = 0.0,
        facts: int = 1,
    ) -> None:
        super().__init__(workdir)
        self.config = StubConfig(chat_delay, embed_delay, facts)

    @property
    def base_url(self) -> str:
        return f"http://{self.address}/v1"

    def _command(self) -> list[str]:
        import sys

        return [
            *(sys.executable, "-m", "bench.stub_llm", "--port", str(self.port)),
            *("--chat-delay", str(self.config.chat_delay)),
            *("--embed-delay", str(self.config.embed_delay), "--facts", str(self.config.facts)),
        ]

    def _env(self) -> Mapping[str, str]:
        import os

        # The child imports bench and tests from the checkout this benchmark runs from.
        root = str(Path(__file__).resolve().parent.parent)
        path = os.environ.get("PYTHONPATH")
        return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}

    def _is_ready(self) -> bool:
        try:
            return "requests" in self.stats()
        except OSError:
            return False

    def _call(self, path: str, payload: Mapping[str, Any] | None = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            f"http://{self.address}{path}",
            data=data,
            headers={"Content-Type": "application/json"},
            method="GET" if payload is None else "POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def stats(self) -> dict[str, Any]:
        found: dict[str, Any] = self._call("/stub/stats")
        return found

    def reset(self) -> None:
        self._call("/stub/reset", {})

    def configure(self, **changes: float) -> None:
        self.config.update(changes)
        self._call("/stub/config", changes)

    def bodies(self) -> dict[str, list[dict[str, Any]]]:
        """The chat and embeddings request bodies since the last reset."""
        found: dict[str, list[dict[str, Any]]] = self._call("/stub/requests")
        return found


def calls_made(stats: Mapping[str, Any]) -> dict[str, int]:
    """Chat and embeddings requests in a `/stub/stats` answer (0 for a kind never asked)."""
    requests = stats.get("requests") or {}
    return {kind: int(requests.get(kind, 0)) for kind in KINDS}


def subjects(stats: Mapping[str, Any]) -> dict[str, int]:
    """Chat requests per subject (memory type, ``reconcile``, ``unknown``) in a stats answer."""
    requests: Mapping[str, int] = stats.get("requests") or {}
    return {name.split(":", 1)[1]: n for name, n in requests.items() if name.startswith("chat:")}


def main(argv: Sequence[str] | None = None) -> None:
    from aiohttp import web

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chat-delay", type=float, default=1.0)
    parser.add_argument("--embed-delay", type=float, default=0.0)
    parser.add_argument("--facts", type=int, default=1)
    args = parser.parse_args(argv)
    config = StubConfig(args.chat_delay, args.embed_delay, args.facts)
    # backlog: a thousand clients may connect at once
    web.run_app(make_app(config), host="127.0.0.1", port=args.port, print=None, backlog=4096)


if __name__ == "__main__":
    main()
