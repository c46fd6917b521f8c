"""The bounded prompt cache of `memstream.runtime.local.llama_server` (pure: states made by hand),
and the
server itself with the packaged small model (slow)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="the local LLM runtime is not installed (pip install 'memstream[local]')",
)

VOCABULARY = 1000


def state(tokens: Sequence[int], *, kv_bytes: int = 1000, logit_rows: int = 512) -> Any:
    from llama_cpp.llama import LlamaState

    ids = np.zeros(4096, dtype=np.intc)
    ids[: len(tokens)] = tokens
    return LlamaState(
        input_ids=ids,
        scores=np.ones((logit_rows, VOCABULARY), dtype=np.single),
        n_tokens=len(tokens),
        llama_state=b"k" * kv_bytes,
        llama_state_size=kv_bytes,
        seed=7,
    )


def prompt(system: int, snapshot: int, length: int = 300) -> list[int]:
    """A prompt of kind `system`: 200 tokens of its system prompt, then its snapshot's."""
    return [system] * 200 + [10_000 + snapshot] * (length - 200)


def test_a_state_counts_its_kv_state_its_logits_and_its_token_ids() -> None:
    from memstream.runtime.local.llama_server import held_bytes

    assert held_bytes(state([1, 2, 3], kv_bytes=1000)) == 1000 + 512 * VOCABULARY * 4 + 4096 * 4


def test_a_state_is_kept_without_its_logits_but_with_everything_else() -> None:
    from memstream.runtime.local.llama_server import without_logits

    full = state([1, 2, 3])
    kept = without_logits(full)
    assert kept.scores.shape == (1, VOCABULARY) and not kept.scores.any()
    assert kept.input_ids is full.input_ids and kept.llama_state is full.llama_state
    assert (kept.n_tokens, kept.llama_state_size, kept.seed) == (3, 1000, 7)


@pytest.mark.parametrize("n_tokens", [0, 1, 300, 900])
def test_the_one_row_kept_fills_the_rows_load_state_restores(n_tokens: int) -> None:
    from memstream.runtime.local.llama_server import without_logits

    scores = np.full((512, VOCABULARY), 5.0, dtype=np.single)  # the model's array (n_batch rows)
    restored = without_logits(state(list(range(n_tokens))))
    scores[:n_tokens, :] = restored.scores.copy()  # what Llama.load_state does with it
    assert not scores[: min(n_tokens, 512)].any()


def test_a_new_state_replaces_the_cached_one_of_its_kind_and_keeps_the_other_kinds() -> None:
    from memstream.runtime.local.llama_server import BoundedPromptCache

    cache = BoundedPromptCache(1 << 30, keep_logits=False)
    for snapshot in range(20):  # 20 distinct snapshots, each asked of three kinds in turn
        for system in (1, 2, 3):
            cache[prompt(system, snapshot)] = state(prompt(system, snapshot))
    assert len(cache.cache_state) == 3
    assert sorted(key[-1] for key in cache.cache_state) == [10_019] * 3  # the newest of each
    newest = cache[prompt(2, 99)]  # a new snapshot of kind 2: served from kind 2's state
    assert list(newest.input_ids[:200]) == [2] * 200


def test_prompts_sharing_fewer_than_128_leading_tokens_are_kept_apart() -> None:
    from memstream.runtime.local.llama_server import BoundedPromptCache

    cache = BoundedPromptCache(1 << 30, keep_logits=False)
    template = [7] * 127
    cache[[*template, 1, 1]] = state([*template, 1, 1])
    cache[[*template, 2, 2]] = state([*template, 2, 2])
    assert len(cache.cache_state) == 2


def test_the_capacity_counts_every_byte_held_and_evicts_the_least_recently_used() -> None:
    from memstream.runtime.local.llama_server import BoundedPromptCache, held_bytes, without_logits

    one = held_bytes(without_logits(state(prompt(1, 0), kv_bytes=10_000)))
    cache = BoundedPromptCache(3 * one, keep_logits=False)
    for system in (1, 2, 3):
        cache[prompt(system, 0)] = state(prompt(system, 0), kv_bytes=10_000)
    cache[prompt(1, 5)]  # a lookup of kind 1 makes it the most recently used
    cache[prompt(4, 0)] = state(prompt(4, 0), kv_bytes=10_000)
    assert sorted(key[0] for key in cache.cache_state) == [1, 3, 4]
    assert cache.cache_size <= 3 * one


def test_with_logits_kept_they_are_counted_and_a_state_over_the_capacity_is_not_cached() -> None:
    from memstream.runtime.local.llama_server import BoundedPromptCache, held_bytes

    big = state(prompt(1, 0))
    cache = BoundedPromptCache(held_bytes(big) - 1, keep_logits=True)
    cache[prompt(1, 0)] = big
    assert len(cache.cache_state) == 0
    roomy = BoundedPromptCache(held_bytes(big), keep_logits=True)
    roomy[prompt(1, 0)] = big
    assert roomy.cache_size == held_bytes(big)
    assert roomy[prompt(1, 1)].scores.shape == (512, VOCABULARY)


# -- the server with the packaged small model ------------------------------------------------------


@pytest.mark.slow
def test_the_server_reuses_a_kinds_system_prompt_and_answers_health_while_busy(
    tmp_path: Path,
) -> None:
    from bench.extraction_eval.run import DEFAULT_CASES, snapshot_for
    from bench.extraction_eval.scoring import parse_cases
    from handlers.extraction.registry import extractor_for
    from memstream.providers.clients import OpenAIChatModel
    from memstream.runtime.llm_choice import PROMPT_CACHE
    from memstream.runtime.local.llm import start_local_llm
    from memstream.runtime.local.weights import SMALL_MODEL, ModelAssemblyError

    first, second = [
        snapshot_for(case)
        for case in parse_cases(json.loads(DEFAULT_CASES.read_text(encoding="utf-8")))[:2]
    ]
    # semantic, then episodic (the model's live context is now episodic's), then semantic
    # again: only the cache holds semantic's system prompt by then
    prompts = [
        extractor_for("semantic").prompt(first),
        extractor_for("episodic").prompt(first),
        extractor_for("semantic").prompt(second),
    ]
    log = tmp_path / "llm.log"
    try:
        server = start_local_llm(
            SMALL_MODEL, log_path=log, extra_args=PROMPT_CACHE, startup_timeout=300
        )
    except ModelAssemblyError:
        pytest.skip("the small model is not installed (pip install 'memstream[local-small]')")
    with server:
        llm = OpenAIChatModel(
            base_url=server.base_url, api_key="x", model=server.model, timeout=900, max_tokens=16
        )
        health: list[float] = []

        def probe_while_busy() -> None:
            time.sleep(1.0)  # the first completion is running by now
            started = time.monotonic()
            with urllib.request.urlopen(server.health_url, timeout=10) as response:
                assert response.status == 200
            health.append(time.monotonic() - started)

        async def ask_both() -> None:
            try:
                for messages in prompts:
                    await llm.complete_json(messages)
            finally:
                await llm.aclose()

        prober = threading.Thread(target=probe_while_busy)
        prober.start()
        asyncio.run(ask_both())
        prober.join()
    text = log.read_text(errors="replace")
    assert "bounded prompt cache of 402,653,184 bytes (without logits)" in text
    reused = [int(n) for n in re.findall(r"Llama\.generate: (\d+) prefix-match", text)]
    assert text.count("Llama._create_completion: cache hit") >= 1
    assert reused[-1] > 300  # the third prompt reused the first one's system prompt
    assert health and health[0] < 5  # answered while the model was busy


# -- repeatable answers ------------------------------------------------------------------------


class _Model:
    """Stands in for `llama_cpp.Llama`: counts resets, and which completion followed one."""

    def __init__(self) -> None:
        self.n_tokens = 1_500  # the previous request's context
        self.calls: list[tuple[str, int]] = []

    def reset(self) -> None:
        self.n_tokens = 0

    def create_chat_completion(self, **kwargs: Any) -> str:
        self.calls.append(("chat", self.n_tokens))
        self.n_tokens = 1_500
        return "chat answer"

    def create_completion(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append(("text", self.n_tokens))
        self.n_tokens = 1_500
        return "text answer"


def test_a_repeatable_model_starts_every_completion_from_an_empty_context() -> None:
    from memstream.runtime.local.llama_server import from_an_empty_context

    model = _Model()
    from_an_empty_context(model)  # type: ignore[arg-type]
    assert model.create_chat_completion(messages=[]) == "chat answer"
    assert model.create_chat_completion(messages=[]) == "chat answer"
    assert model.create_completion("prompt") == "text answer"
    assert model.calls == [("chat", 0), ("chat", 0), ("text", 0)]


def test_the_repeatable_flag_is_read_and_not_passed_to_llama_cpp() -> None:
    from memstream.runtime.local.llama_server import _parse

    _, model, repeatable = _parse(["--model", "x.gguf", "--repeatable"])
    assert repeatable
    assert model.model == "x.gguf"
    assert not _parse(["--model", "x.gguf"])[2]


@pytest.mark.slow
def test_a_repeatable_server_answers_a_request_alike_whatever_was_asked_before(
    tmp_path: Path,
) -> None:
    from openai import OpenAI

    from bench.extraction_eval.run import DEFAULT_CASES, snapshot_for
    from bench.extraction_eval.scoring import parse_cases
    from handlers.extraction.registry import extractor_for
    from memstream.runtime.llm_choice import REPEATABLE
    from memstream.runtime.local.llm import start_local_llm
    from memstream.runtime.local.weights import SMALL_MODEL, ModelAssemblyError

    first, second = [
        snapshot_for(case)
        for case in parse_cases(json.loads(DEFAULT_CASES.read_text(encoding="utf-8")))[:2]
    ]
    asked, other = (extractor_for("semantic").prompt(s) for s in (first, second))
    try:
        server = start_local_llm(
            SMALL_MODEL, log_path=tmp_path / "llm.log", extra_args=REPEATABLE, startup_timeout=300
        )
    except ModelAssemblyError:
        pytest.skip("the small model is not installed (pip install 'memstream[local-small]')")
    with server:
        client = OpenAI(base_url=server.base_url, api_key="x", timeout=900)

        def answer(messages: Any) -> str | None:
            completion = client.chat.completions.create(
                model=server.model, messages=messages, temperature=0.0, max_tokens=96
            )
            return completion.choices[0].message.content

        # first, after another snapshot's prompt of the same kind, right after itself
        answers = [answer(asked), answer(other), answer(asked), answer(asked)]
    assert answers[0] == answers[2] == answers[3]
    text = (tmp_path / "llm.log").read_text(errors="replace")
    assert "every completion from an empty context" in text
    assert "prefix-match hit" not in text
