"""llama-cpp-python's OpenAI-compatible server, with a prompt cache bounded by what it holds.

    python -m memstream.runtime.local.llama_server --model X.gguf --cache true --cache_size BYTES
    ...

The command line is ``python -m llama_cpp.server``'s (same flags, same app); the prompt cache
differs, and ``GET /health`` answers at once. (The stock server's only cheap-looking request,
``GET /v1/models``, waits for the model's lock: behind a completion that takes minutes on a CPU,
so a liveness probe through it would take a busy server for a dead one.) See
docs/architecture.md, "Operations" (the local LLM).

Why not the stock cache: llama-cpp-python 0.3.36's `LlamaRAMCache` bounds ``--cache_size`` by
``llama_state_size`` alone, llama.cpp's serialised KV state (a few MB a prompt), but every
`LlamaState` it keeps also holds a copy of the model's logits array for the prompt's tokens:
up to ``n_batch`` (512) rows of the 151,936-token vocabulary with ``--logits_all false``, one row
per prompt token with the server's default ``--logits_all true`` -- 300 MB or more a state. A
1 GiB cache of 7 MB states admits about 140 of them, so the server grew by a couple of hundred
MB with every distinct prompt until the machine ran out (bench/prompt_cache.py,
BENCHMARKS.md "Prompt cache").

What this cache does instead (`BoundedPromptCache`):

* It counts the bytes a state really holds -- the KV state, the logits and the token ids -- so
  ``--cache_size`` is a true bound on the RAM the cache takes (least recently used out first).
* With ``--logits_all false`` it keeps no logits at all, one zero row instead: in that mode
  llama-cpp-python never writes the logits array (sampling reads llama.cpp's own output
  buffer), so what a state copies is whatever the array held, never read again. Restoring a
  state marks the model as needing an evaluation (``_requires_eval``) and `Llama.generate`
  then evaluates at least one token before it samples, so the restored logits are never used;
  `Llama.load_state` broadcasts the one row into the rows it fills. A state then costs its KV
  state (12 KB a token with the 0.5B model, 28 KB with the 1.5B) and little else. (The first
  restore still fills the model's own logits array, ``n_batch`` rows: 311 MB once, not per
  state.)
* It keeps one state per prompt kind: a new state replaces every cached one it shares at least
  `SAME_KIND_TOKENS` (128) leading tokens with. A lookup returns the state sharing the longest
  prefix with the new prompt, and what the memory types' (and reconciliation's) prompts share
  is their long system prompt, 500-800 tokens: the newest state of a kind serves every later
  prompt of that kind as well as an older one would. (Only a prompt closer to the older
  state's own snapshot -- a retry of that very request -- would do better with it, and a
  stage's retry follows its request before the stage sends another.) Chat templates share
  well under 128 tokens between different system prompts, so kinds do not replace each other.
  The cache then holds five or so states however many distinct prompts pass, and the
  byte bound is the backstop.

With ``--logits_all true`` (logprobs) the logits are kept, and counted.

**Repeatable answers** (``--repeatable``, this module's own flag; no prompt cache then). A greedy
answer (temperature 0) of llama.cpp depends on how its prompt was evaluated, not only on the prompt:
llama-cpp-python keeps the last request's evaluated tokens and evaluates only what a new prompt adds
to the prefix they share, and the logits of a token evaluated in another batch differ in their last
bits -- enough for the 1.5B model to answer one extraction prompt with a list cut at the token limit
when asked first, 8 facts after another snapshot's prompt and 7 right after itself (BENCHMARKS.md,
"Repeatable answers"). So the answer to a request depends on the request before it, and in a
pipeline whose stages call one server the order of requests varies from run to run. With
``--repeatable`` every completion starts from an empty context and evaluates its whole prompt from
the first token, in the same batches each time: the same request gets the same answer whatever came
before, at the price of evaluating the shared system prompt again each time. For benchmarks that
compare runs; serving is faster without it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from llama_cpp.llama import Llama, LlamaState
from llama_cpp.llama_cache import LlamaRAMCache

HEALTH_PATH = "/health"
"""Answers ``{"status": "ok"}`` without waiting for the model (see the module docstring)."""

SAME_KIND_TOKENS = 128
"""Leading tokens two prompts share when they are of one kind (one system prompt)."""


def held_bytes(state: LlamaState) -> int:
    """The RAM one cached state takes: KV state, logits and token ids."""
    return int(state.llama_state_size) + int(state.scores.nbytes) + int(state.input_ids.nbytes)


def without_logits(state: LlamaState) -> LlamaState:
    """`state` with one zero row of logits instead of its copy (see the module docstring)."""
    row = np.zeros((1, state.scores.shape[1]), dtype=state.scores.dtype)
    return LlamaState(
        input_ids=state.input_ids,
        scores=row,
        n_tokens=state.n_tokens,
        llama_state=state.llama_state,
        llama_state_size=state.llama_state_size,
        seed=state.seed,
    )


class BoundedPromptCache(LlamaRAMCache):
    """One state per prompt kind, within a capacity that counts every byte the states hold."""

    def __init__(
        self, capacity_bytes: int, *, keep_logits: bool, same_kind: int = SAME_KIND_TOKENS
    ) -> None:
        super().__init__(capacity_bytes)
        self.keep_logits = keep_logits
        self.same_kind = same_kind

    @property
    def cache_size(self) -> int:
        return sum(held_bytes(state) for state in self.cache_state.values())

    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None:
        kept = value if self.keep_logits else without_logits(value)
        if held_bytes(kept) > self.capacity_bytes:
            return  # it would only push out everything else, and then itself
        tokens = tuple(key)
        for older in [k for k in self.cache_state if k != tokens]:
            if Llama.longest_token_prefix(older, tokens) >= self.same_kind:
                del self.cache_state[older]  # the new state serves its kind from now on
        super().__setitem__(tokens, kept)


REPEATABLE_FLAG = "--repeatable"
"""Every completion from an empty context (see the module docstring)."""


def from_an_empty_context(model: Llama) -> None:
    """Make every chat and text completion of `model` start from an empty context, so its
    whole prompt is evaluated from the first token each time (see the module docstring). The
    server runs one completion at a time (its model lock), so nothing runs in between."""

    def after_a_reset(complete: Callable[..., Any]) -> Callable[..., Any]:
        def from_empty(*args: Any, **kwargs: Any) -> Any:
            model.reset()  # type: ignore[no-untyped-call]
            return complete(*args, **kwargs)

        return from_empty

    model.create_chat_completion = after_a_reset(model.create_chat_completion)  # type: ignore[method-assign]
    model.create_completion = after_a_reset(model.create_completion)  # type: ignore[method-assign]


def _parse(argv: Sequence[str] | None) -> tuple[Any, Any, bool]:
    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args_from_model(parser, Settings)
    parser.add_argument(REPEATABLE_FLAG, action="store_true", help="answers independent of order")
    args = parser.parse_args(argv)
    repeatable = bool(args.repeatable)
    del args.repeatable
    server, model = (
        parse_model_from_args(ServerSettings, args),
        parse_model_from_args(ModelSettings, args),
    )
    return server, model, repeatable


def main(argv: Sequence[str] | None = None) -> None:
    """Build llama-cpp-python's app for one model, swap in the bounded cache, serve it."""
    import uvicorn
    from llama_cpp.server import app as server_app

    server_settings, model_settings, repeatable = _parse(argv)
    cache_size = int(model_settings.cache_size)
    wants_cache = bool(model_settings.cache) and not repeatable
    model_settings.cache = False  # the stock cache is never built; ours is set below
    app = server_app.create_app(server_settings=server_settings, model_settings=[model_settings])
    alias = str(model_settings.model_alias or model_settings.model)

    async def health() -> dict[str, str]:
        """Alive, the model loaded (create_app loads it before the server listens)."""
        return {"status": "ok", "model": alias}

    app.add_api_route(HEALTH_PATH, health, methods=["GET"])
    proxy = server_app._llama_proxy  # the one model it loaded (create_app loads it eagerly)
    assert proxy is not None
    model = proxy()
    if repeatable:
        from_an_empty_context(model)
        print("memstream: every completion from an empty context", file=sys.stderr, flush=True)
    if wants_cache:
        model.set_cache(BoundedPromptCache(cache_size, keep_logits=bool(model_settings.logits_all)))
        print(
            f"memstream: bounded prompt cache of {cache_size:,} bytes "
            f"({'with' if model_settings.logits_all else 'without'} logits)",
            file=sys.stderr,
            flush=True,
        )
    uvicorn.run(
        app,
        host=os.getenv("HOST", server_settings.host),
        port=int(os.getenv("PORT", server_settings.port)),
    )


if __name__ == "__main__":
    main()
