"""A scripted, OpenAI-compatible HTTP server for deterministic pipeline tests.

It runs in a background thread on 127.0.0.1 (stdlib ``ThreadingHTTPServer``, no extra
dependencies) and serves:

* ``POST /v1/chat/completions`` -- the answer comes from rules registered with :meth:`on`
  (first match wins), else from ``default``; :meth:`enqueue`, :meth:`fail_json` and
  :meth:`fail_http` put one-off answers in front of the rules (retry tests).
* ``POST /v1/embeddings`` -- deterministic vectors: a signed, hashed bag of words, L2-normalised
  (identical texts give identical vectors; texts sharing words are closer). ``float`` and
  ``base64`` encodings, ``input`` as a string or a list, optional ``dimensions``.
* ``GET /v1/models``.

Token counts in ``usage`` are words by default; pass ``token_counter`` (anything with
``prompt_tokens(messages)`` and ``completion_tokens(text)``, e.g. ``bench.tokens.QwenTokens``) to
count as a real model's tokenizer would.

``failing`` (an :class:`HTTPFailure`, or ``None``) fails every chat and embeddings request while it
is set, and ``latency`` slows every answer: outages and slowness that last as long as a test wants.

Every request body is recorded in :attr:`ScriptedLLM.requests` (thread-safe).

Example::

    with ScriptedLLM(default={"facts": []}) as llm:
        llm.on("tea", {"facts": [{"text": "the user likes tea"}]})
        client = openai.OpenAI(base_url=llm.base_url, api_key="test")
        ...
        assert "tea" in llm.chat_requests[0]["messages"][-1]["content"]

Note: the ``openai`` client retries HTTP 408/409/429/5xx (``max_retries=2`` by default), so a
single :meth:`fail_http` is absorbed by the client unless it is created with ``max_retries=0``.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import logging
import math
import re
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Protocol, Self

__all__ = ["HTTPFailure", "Rule", "ScriptedLLM", "embed_text"]

log = logging.getLogger(__name__)

Request = dict[str, Any]
#: What a rule answers: the assistant message content (a str; dicts/lists are JSON-encoded),
#: or a callable over the request body returning one of those, or an :class:`HTTPFailure`.
Response = str | Mapping[str, Any] | Sequence[Any] | Callable[[Request], Any]
Matcher = str | Callable[[str], bool]
Scope = Literal["all", "last_user"]

INVALID_JSON = '{"facts": [{"text": "unterminated'
DEFAULT_DIMS = 64
_WORD = re.compile(r"\w+", re.UNICODE)


class TokenCounter(Protocol):
    def prompt_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int: ...

    def completion_tokens(self, text: str) -> int: ...


@dataclass(frozen=True)
class HTTPFailure:
    """Answer a request with an HTTP error in the OpenAI error shape."""

    status: int = 500
    message: str = "scripted failure"
    type: str = "server_error"
    code: str | None = None


@dataclass
class Rule:
    """A chat rule; ``remaining`` is how many more times it may match (``None``: no limit)."""

    matcher: Matcher
    response: Response
    scope: Scope = "all"
    remaining: int | None = None
    hits: int = 0

    def matches(self, request: Request) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        text = last_user_text(request) if self.scope == "last_user" else all_text(request)
        if isinstance(self.matcher, str):
            return self.matcher in text
        return bool(self.matcher(text))


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return "\n".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return str(content)


def all_text(request: Request) -> str:
    """The request's messages' text, concatenated with newlines."""
    return "\n".join(_content_text(m.get("content")) for m in request.get("messages", []))


def last_user_text(request: Request) -> str:
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            return _content_text(message.get("content"))
    return ""


def _count_tokens(text: str) -> int:
    return len(_WORD.findall(text)) or (1 if text else 0)


def embed_text(text: str, dims: int = DEFAULT_DIMS) -> list[float]:
    """Deterministic embedding: signed feature hashing of lower-cased words, L2-normalised."""
    vec = [0.0] * dims
    words = _WORD.findall(text.lower()) or ["<empty>"]
    for word in words:
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        vec[value % dims] += 1.0 if (value >> 63) & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:  # the words' signs cancelled out exactly
        vec[0], norm = 1.0, 1.0
    return [x / norm for x in vec]


def _to_json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value)


@dataclass
class _State:
    rules: list[Rule] = field(default_factory=list)
    queue: deque[Response | HTTPFailure] = field(default_factory=deque)
    requests: list[tuple[str, Request]] = field(default_factory=list)
    usage: list[tuple[Request, dict[str, int]]] = field(default_factory=list)


class ScriptedLLM:
    """OpenAI-compatible chat + embeddings server with scripted answers (see module doc)."""

    def __init__(
        self,
        *,
        default: Response = '{"facts": []}',
        model: str = "scripted-llm",
        embedding_model: str = "scripted-embedding",
        dims: int = DEFAULT_DIMS,
        latency: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        token_counter: TokenCounter | None = None,
    ) -> None:
        self.default = default
        #: counts the `usage` of chat answers (None: words)
        self.token_counter = token_counter
        self.model = model
        self.embedding_model = embedding_model
        self.dims = dims
        #: seconds to sleep before answering each request (timeout tests)
        self.latency = latency
        #: while set, every chat and embeddings request gets this failure (an outage that lasts
        #: until it is cleared, e.g. `llm.failing = HTTPFailure(503)` ... `llm.failing = None`)
        self.failing: HTTPFailure | None = None
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._state = _State()
        # fail_http(endpoint="embeddings"/"any") failures, consulted before answering
        self._http_failures: deque[tuple[str, HTTPFailure]] = deque()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ----------------------------------------------------------------------------

    def on(
        self,
        matcher: Matcher,
        response: Response,
        *,
        scope: Scope = "all",
        times: int | None = None,
    ) -> Rule:
        """Answer chat requests whose text contains ``matcher`` (or where ``matcher(text)``).

        ``scope="last_user"`` matches against the last user message only. ``times`` limits how
        often the rule may fire. Rules are tried in registration order; the first match wins.
        """
        rule = Rule(matcher=matcher, response=response, scope=scope, remaining=times)
        with self._lock:
            self._state.rules.append(rule)
        return rule

    def enqueue(self, *responses: Response | HTTPFailure) -> None:
        """Answer the next chat requests with these, in order, before consulting the rules."""
        with self._lock:
            self._state.queue.extend(responses)

    def fail_json(self, times: int = 1, content: str = INVALID_JSON) -> None:
        """The next ``times`` chat answers are invalid JSON; then the rules apply again."""
        self.enqueue(*([content] * times))

    def fail_http(
        self,
        status: int = 500,
        times: int = 1,
        message: str = "scripted failure",
        *,
        endpoint: Literal["chat", "embeddings", "any"] = "chat",
    ) -> None:
        """The next ``times`` requests get HTTP ``status`` (chat only unless ``endpoint``)."""
        failure = HTTPFailure(status=status, message=message)
        if endpoint == "chat":
            self.enqueue(*([failure] * times))
        else:
            with self._lock:
                self._http_failures.extend([(endpoint, failure)] * times)

    def reset(self) -> None:
        """Forget rules, queued answers and recorded requests."""
        with self._lock:
            self._state = _State()
            self._http_failures.clear()

    # -- inspection ---------------------------------------------------------------------------

    @property
    def requests(self) -> list[Request]:
        """Every request body received so far (chat and embeddings), oldest first."""
        with self._lock:
            return [body for _, body in self._state.requests]

    @property
    def chat_requests(self) -> list[Request]:
        with self._lock:
            return [body for path, body in self._state.requests if path == "chat"]

    @property
    def chat_usage(self) -> list[tuple[Request, dict[str, int]]]:
        """(request, usage) of every chat request answered (not failed), oldest first."""
        with self._lock:
            return list(self._state.usage)

    @property
    def embedding_requests(self) -> list[Request]:
        with self._lock:
            return [body for path, body in self._state.requests if path == "embeddings"]

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("ScriptedLLM is not started")
        port: int = self._httpd.server_address[1]
        return port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` -- pass as the OpenAI client's ``base_url``."""
        return f"http://{self._host}:{self.port}/v1"

    def embed(self, text: str) -> list[float]:
        return embed_text(text, self.dims)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        if self._httpd is not None:
            return self
        handler = type("_BoundHandler", (_Handler,), {"llm": self})
        httpd = ThreadingHTTPServer((self._host, self._port), handler)
        httpd.daemon_threads = True
        self._port = httpd.server_address[1]  # a restart after stop() serves on the same port
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, name="scripted-llm", kwargs={"poll_interval": 0.05}
        )
        self._thread.daemon = True
        self._thread.start()
        log.debug("scripted LLM listening on %s", self.base_url)
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- request handling (server threads) ----------------------------------------------------

    def _record(self, kind: str, body: Request) -> None:
        with self._lock:
            self._state.requests.append((kind, body))

    def _pop_http_failure(self, kind: str) -> HTTPFailure | None:
        if self.failing is not None:
            return self.failing
        with self._lock:
            if self._http_failures and self._http_failures[0][0] in (kind, "any"):
                return self._http_failures.popleft()[1]
        return None

    def _choose(self, body: Request) -> Response | HTTPFailure:
        with self._lock:
            if self._state.queue:
                return self._state.queue.popleft()
            for rule in self._state.rules:
                if rule.matches(body):
                    rule.hits += 1
                    if rule.remaining is not None:
                        rule.remaining -= 1
                    return rule.response
        return self.default

    def chat_completion(self, body: Request) -> tuple[int, Any]:
        """Compute the (status, JSON body) answer to a chat completion request."""
        self._record("chat", body)
        failure = self._pop_http_failure("chat")
        choice: Response | HTTPFailure = failure if failure is not None else self._choose(body)
        if callable(choice) and not isinstance(choice, HTTPFailure):
            choice = choice(body)
        if isinstance(choice, HTTPFailure):
            return choice.status, _error_body(choice)
        content = _to_json_text(choice)
        if self.token_counter is not None:
            prompt_tokens = self.token_counter.prompt_tokens(body.get("messages", []))
            completion_tokens = self.token_counter.completion_tokens(content)
        else:
            prompt_tokens = _count_tokens(all_text(body))
            completion_tokens = _count_tokens(content)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        with self._lock:
            self._state.usage.append((body, usage))
        return 200, {
            "id": f"chatcmpl-scripted-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "system_fingerprint": "scripted",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
        }

    def embeddings(self, body: Request) -> tuple[int, Any]:
        self._record("embeddings", body)
        failure = self._pop_http_failure("embeddings")
        if failure is not None:
            return failure.status, _error_body(failure)
        raw = body.get("input")
        texts: list[str]
        if isinstance(raw, str):
            texts = [raw]
        elif isinstance(raw, list) and all(isinstance(x, str) for x in raw):
            texts = list(raw)
        elif isinstance(raw, list):  # token ids: embed their decimal form
            texts = [" ".join(map(str, x)) if isinstance(x, list) else str(x) for x in raw]
        else:
            return 400, _error_body(
                HTTPFailure(400, "'input' is required", "invalid_request_error")
            )
        dims = int(body.get("dimensions") or self.dims)
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = embed_text(text, dims)
            embedding: Any = (
                base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode()
                if as_base64
                else vector
            )
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(_count_tokens(t) for t in texts)
        return 200, {
            "object": "list",
            "data": data,
            "model": body.get("model") or self.embedding_model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def models(self) -> tuple[int, Any]:
        return 200, {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "memstream-tests"}
                for name in (self.model, self.embedding_model)
            ],
        }


def _error_body(failure: HTTPFailure) -> dict[str, Any]:
    return {
        "error": {
            "message": failure.message,
            "type": failure.type,
            "param": None,
            "code": failure.code,
        }
    }


def _sse_from_completion(completion: Mapping[str, Any]) -> bytes:
    """A streamed version of a chat.completion (one content chunk, a final chunk, [DONE])."""
    base = {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
    }
    content = completion["choices"][0]["message"]["content"]
    chunks = [
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": content},
                    "finish_reason": None,
                }
            ],
        },
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    events.append("data: [DONE]\n\n")
    return "".join(events).encode()


class _Handler(BaseHTTPRequestHandler):
    llm: ScriptedLLM
    protocol_version = "HTTP/1.1"
    server_version = "ScriptedLLM/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("scripted LLM: " + format, *args)

    def _path(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path.removeprefix("/v1")

    def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self._path() == "/models":
            self._send(*self.llm.models())
        else:
            self._send(404, _error_body(HTTPFailure(404, f"no route {self.path}", "not_found")))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            failure = HTTPFailure(400, f"invalid JSON body: {exc}", "invalid_request_error")
            self._send(400, _error_body(failure))
            return
        if self.llm.latency:
            time.sleep(self.llm.latency)
        path = self._path()
        try:
            if path == "/chat/completions":
                status, payload = self.llm.chat_completion(body)
                if status == 200 and body.get("stream"):
                    self._send(200, _sse_from_completion(payload), "text/event-stream")
                    return
            elif path == "/embeddings":
                status, payload = self.llm.embeddings(body)
            else:
                status = 404
                payload = _error_body(HTTPFailure(404, f"no route {self.path}", "not_found"))
        except Exception as exc:  # a bug in a scripted callable: make it visible to the test
            log.exception("scripted LLM handler failed")
            status = int(HTTPStatus.INTERNAL_SERVER_ERROR)
            payload = _error_body(HTTPFailure(500, f"scripted handler raised {exc!r}"))
        self._send(status, payload)
