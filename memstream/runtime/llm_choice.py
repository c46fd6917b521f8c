"""Choosing the LLM for `up`/`demo`: the configured endpoint, else the packaged local model."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memstream.config import Settings

if TYPE_CHECKING:
    from memstream.runtime.local.llm import LocalLLMServer
    from memstream.runtime.local.weights import ModelSpec

PROMPT_CACHE = ("--logits_all", "false", "--cache", "true", "--cache_size", str(384 << 20))
"""llama.cpp's prompt cache: each memory type's long system prompt is evaluated once, not once
per snapshot. Measured on the extraction of 6 snapshots by all four types: the same memories, a
third of the seconds (bench/types_cost-1.5b*.json, BENCHMARKS.md).
`memstream.runtime.local.llama_server`
keeps one state per prompt kind (five: four types, reconciliation) and no logits, and its
384 MiB bound counts every byte a state holds (five states of 2,300 tokens with the 1.5B model);
no logits are computed for prompt tokens either (``--logits_all false``: memstream asks for no
logprobs). Measured: bench/prompt_cache.py, BENCHMARKS.md "Prompt cache"."""

REPEATABLE = ("--logits_all", "false", "--repeatable")
"""Every prompt evaluated whole, from an empty context, and no prompt cache: the same request
gets the same answer whatever was asked before it (`llm.local_repeatable`;
`memstream.runtime.local.llama_server`, "Repeatable answers")."""


def local_server_args(settings: Settings) -> tuple[str, ...]:
    """The local server's extra command line: the prompt cache, or repeatable answers."""
    return REPEATABLE if settings.llm.local_repeatable else PROMPT_CACHE


def wants_local_llm(settings: Settings) -> bool:
    """No endpoint is configured and the local model is not switched off."""
    return not settings.llm.configured and settings.llm.local != "off"


def local_llm_available(settings: Settings) -> bool:
    """The local LLM can run: the runtime is installed (the weights are checked when started)."""
    from memstream.runtime.local.llm import llama_cpp_available

    return wants_local_llm(settings) and llama_cpp_available()


@dataclass(frozen=True)
class LocalLLM:
    """The workers' LLM environment, and the local server when `up` started one."""

    environment: dict[str, str]
    server: LocalLLMServer | None = None


@contextmanager
def local_llm(settings: Settings, log_dir: Path) -> Iterator[LocalLLM]:
    """Start the local LLM server if the configuration asks for it (and stop it afterwards).

    The server is not watched here: `memstream.runtime.supervisor.Supervisor(pipeline, servers=...)`
    restarts it on the same port when it dies (as `memstream up` does).
    """
    if not wants_local_llm(settings):
        yield LocalLLM({})
        return
    args = local_server_args(settings)
    with start_local_model(local_spec(settings), log_dir, extra_args=args) as server:
        yield LocalLLM(local_llm_worker_environment(server.base_url, server.model), server)


def local_spec(settings: Settings) -> ModelSpec:
    """The packaged model `llm.local` names (`auto`: the default one)."""
    from memstream.runtime.local.weights import DEFAULT_MODEL, MODELS

    return DEFAULT_MODEL if settings.llm.local in ("auto", "off") else MODELS[settings.llm.local]


def start_local_model(
    spec: ModelSpec, log_dir: Path, *, extra_args: Sequence[str] = PROMPT_CACHE
) -> LocalLLMServer:
    """Start the local server of `spec` (or of `$MEMSTREAM_LOCAL_MODEL`), saying so on stderr;
    the caller stops it (or uses it in a `with` block)."""
    from memstream.runtime.local.llm import start_local_llm
    from memstream.runtime.local.weights import MODEL_ENV

    own = os.environ.get(MODEL_ENV)
    print(f"starting the local LLM ({own or spec.alias}) …", file=sys.stderr, flush=True)
    started = time.monotonic()
    log_dir.mkdir(parents=True, exist_ok=True)
    server = start_local_llm(
        spec,
        progress=_progress_printer(),
        log_path=log_dir / "local-llm.log",
        extra_args=extra_args,
    )
    print(
        f"local LLM ready in {time.monotonic() - started:.1f}s at {server.base_url}",
        file=sys.stderr,
        flush=True,
    )
    return server


def local_llm_worker_environment(base_url: str, model: str) -> dict[str, str]:
    """What the stage workers are told about a local LLM server."""
    return {
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "local",
        "MEMSTREAM_LLM_MODEL": model,
        # A CPU-bound model answers slowly when the machine is busy: wait, do not abandon.
        "MEMSTREAM_LLM_TIMEOUT": "900",
        # One server answers one request at a time, on every core: a worker's second request
        # in flight would only wait in its queue (and time out there).
        "MEMSTREAM_LLM_MAX_IN_FLIGHT": "1",
    }


def _progress_printer() -> Callable[[int, int], None]:
    last = [-1]

    def report(done: int, total: int) -> None:
        percent = done * 100 // max(total, 1)
        if percent // 10 != last[0] // 10 or done == total:
            last[0] = percent
            print(
                f"  preparing model weights: {percent}% of {total / 1e6:.0f} MB",
                file=sys.stderr,
                flush=True,
            )

    return report
