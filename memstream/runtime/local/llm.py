"""A local chat LLM: the packaged GGUF weights (`memstream.runtime.local.weights`) served by
llama.cpp.

`LocalLLMServer` runs ``python -m memstream.runtime.local.llama_server``
(``llama-cpp-python[server]``'s server with a prompt cache bounded by the bytes it holds) as a
child process on 127.0.0.1, an OpenAI-compatible endpoint that accepts
``response_format={"type": "json_object"}``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from memstream.runtime.local.weights import ModelSpec, ProgressCallback, resolve_model
from memstream.runtime.servers import LoopbackServer, ServerStartError, free_port

logger = logging.getLogger(__name__)

SERVER_MODULE = "memstream.runtime.local.llama_server"
"""llama-cpp-python's server with memstream's bounded prompt cache (same command line)."""


class LocalLLMUnavailable(RuntimeError):
    """The local LLM cannot run: a package is missing or the server did not start."""


def llama_cpp_available() -> bool:
    """Whether ``llama-cpp-python`` is installed (without importing it)."""
    return importlib.util.find_spec("llama_cpp") is not None


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class LocalLLMServer(LoopbackServer):
    """The llama.cpp server (`memstream.runtime.local.llama_server`) for one GGUF file, as a child
    process
    on 127.0.0.1.

    A :class:`~memstream.runtime.servers.LoopbackServer`: use it as a context manager, or call
    `start`
    and `stop`. Its output goes to `log_path` (a file, never an unread pipe): the given one,
    else ``local-llm.log`` in a temporary folder that leaving the ``with`` block (or `cleanup`)
    removes. The child runs in that folder. A failed start raises `LocalLLMUnavailable` with
    the log's last lines.
    """

    name = "local-llm"
    startup_timeout_default = 120.0
    stop_timeout_default = 10.0
    poll_interval = 0.25

    def __init__(
        self,
        model_path: Path,
        *,
        alias: str,
        host: str = "127.0.0.1",
        port: int | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        log_path: Path | None = None,
        startup_timeout: float = 120.0,
        python: str = sys.executable,
        server_module: str = SERVER_MODULE,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        super().__init__(
            None if log_path is None else Path(log_path).parent,
            port=port or free_port(host),
            startup_timeout=startup_timeout,
        )
        if log_path is not None:
            self.log_path = Path(log_path)
        self.model_path = Path(model_path)
        self.alias = alias
        self.host = host
        self.n_ctx = n_ctx
        self.n_threads = n_threads or _default_threads()
        self._python = python
        self._server_module = server_module
        self._extra_env = dict(env or {})
        self._extra_args = tuple(extra_args)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (ends in ``/v1``)."""
        return f"http://{self.address}/v1"

    @property
    def model(self) -> str:
        """The model name to send in requests."""
        return self.alias

    def command(self) -> list[str]:
        """The command line the server is started with."""
        return [
            self._python,
            "-m",
            self._server_module,
            "--model",
            # absolute: the child runs in the log's folder, not in this process's
            str(self.model_path.absolute()),
            "--model_alias",
            self.alias,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            *self._extra_args,
        ]

    def start(self) -> Self:
        """Start the server and wait until it answers ``GET /v1/models`` (bounded)."""
        try:
            return super().start()
        except ServerStartError as exc:
            raise LocalLLMUnavailable(
                f"the local LLM server did not answer {self.base_url}/models: {exc}"
            ) from exc

    def _prepare(self) -> None:
        ours = self._server_module == SERVER_MODULE
        package = "llama_cpp" if ours else self._server_module.split(".")[0]
        if importlib.util.find_spec(package) is None:
            raise LocalLLMUnavailable(
                f"the local LLM runtime is not installed ({package}): pip install "
                "'memstream[local]' (llama-cpp-python builds from source, ~8 min on 2 cores)"
            )
        if not self.model_path.is_file():
            raise LocalLLMUnavailable(f"model file not found: {self.model_path}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)

    def _command(self) -> list[str]:
        return self.command()

    def _env(self) -> Mapping[str, str]:
        return {**os.environ, "HF_HUB_OFFLINE": "1", **self._extra_env}

    @property
    def health_url(self) -> str:
        """What answers at once while the server lives: ``/health`` on memstream's server (the
        stock server's ``/v1/models`` waits behind a running completion)."""
        if self._server_module == SERVER_MODULE:
            return f"http://{self.address}/health"
        return f"{self.base_url}/models"

    def _is_ready(self) -> bool:
        return answers(self.health_url, timeout=2)


def answers(url: str, *, timeout: float, headers: Mapping[str, str] | None = None) -> bool:
    """``GET url`` answers 200 within `timeout` seconds."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def start_local_llm(
    spec: ModelSpec | None = None,
    *,
    cache_dir: Path | None = None,
    progress: ProgressCallback | None = None,
    port: int | None = None,
    n_ctx: int = 4096,
    n_threads: int | None = None,
    log_path: Path | None = None,
    startup_timeout: float = 120.0,
    extra_args: Sequence[str] = (),
    server_module: str = SERVER_MODULE,
) -> LocalLLMServer:
    """Assemble (or reuse) the model, or take ``$MEMSTREAM_LOCAL_MODEL``, and start a server.

    ``extra_args`` go to the llama.cpp server's command line (e.g. ``--cache true``);
    ``server_module="llama_cpp.server"`` runs the stock server (benchmarks compare them). The caller
    owns the returned running server: ``stop()`` it, or use it in a ``with`` block.
    """
    if not llama_cpp_available():
        raise LocalLLMUnavailable(
            "the local LLM runtime is not installed: pip install 'memstream[local]'"
        )
    path, alias = resolve_model(spec, cache_dir, progress)
    server = LocalLLMServer(
        path,
        alias=alias,
        port=port,
        n_ctx=n_ctx,
        n_threads=n_threads,
        log_path=log_path,
        startup_timeout=startup_timeout,
        extra_args=extra_args,
        server_module=server_module,
    )
    return server.start()
