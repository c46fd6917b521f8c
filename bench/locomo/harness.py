"""Where a LoCoMo run gets its pipeline and its LLMs.

- `pipeline_on`: every stage worker against a broker and database the caller already runs (the
  benchmark suite's shared servers, an integration test's fixtures), with fresh topics and a
  fresh database;
- `local_model`: the packaged llama.cpp model, started only while holding the machine's model
  lock (`/tmp/memstream-llama.lock`, or `$MEMSTREAM_LLAMA_LOCK`): one model server at a time.

`LOCOMO_WINDOW` makes each LoCoMo session one snapshot, promoted by the session's flush.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

from bench.llama_timings import llama_lock
from memstream.config import Settings, load_settings
from memstream.runtime.pipeline import (
    KAFKA_ENVIRONMENT,
    TANSU_ENVIRONMENT,
    Pipeline,
    pipeline_stages,
)
from memstream.runtime.topics import ensure_topics

LOCOMO_WINDOW = {
    "MEMSTREAM_MAX_MESSAGES": "1000",
    "MEMSTREAM_IDLE_TIMEOUT": "3600",
}
"""Larger than any LoCoMo session (the longest has fewer than 50 turns): only flushes promote."""


@contextlib.contextmanager
def pipeline_on(
    *,
    bootstrap_servers: str,
    flavour: str,
    mongo_uri: str,
    llm_environment: Mapping[str, str],
    memory_types: str,
    log_dir: Path,
) -> Iterator[Settings]:
    """All stage workers on an existing broker and database (own topics, groups, database)."""
    run_id = uuid.uuid4().hex[:8]
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "locomo-config.yaml").write_text("# settings come from the environment\n")
    environment = {
        "MEMSTREAM_CONFIG": str(log_dir / "locomo-config.yaml"),
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers,
        "MONGODB_URI": mongo_uri,
        "MONGODB_DATABASE": f"locomo_{run_id}",
        "MEMSTREAM_TOPIC_PREFIX": f"locomo-{run_id}.",
        "MEMSTREAM_GROUP_PREFIX": f"locomo-{run_id}-",
        "MEMSTREAM_ENABLED_EXTRACTIONS": memory_types,
        **(TANSU_ENVIRONMENT if flavour == "tansu" else KAFKA_ENVIRONMENT),
        **LOCOMO_WINDOW,
        **llm_environment,
    }
    settings = load_settings(environ=environment)
    asyncio.run(ensure_topics(settings.kafka))
    pipeline = Pipeline(pipeline_stages(settings), environment, log_dir)
    try:
        pipeline.start(timeout=180)
        yield settings
    finally:
        pipeline.stop()


@contextlib.contextmanager
def local_model(size: str, log_dir: Path, *, repeatable: bool = False) -> Iterator[dict[str, str]]:
    """The packaged local model (`small` or `large`), under the model lock, with its prompt
    cache or, when `repeatable`, every prompt evaluated whole (`llm.local_repeatable`); the
    workers' LLM environment (its endpoint and model name)."""
    from memstream.runtime.llm_choice import PROMPT_CACHE, REPEATABLE
    from memstream.runtime.local.llm import start_local_llm
    from memstream.runtime.local.weights import MODELS

    log_dir.mkdir(parents=True, exist_ok=True)
    with (
        llama_lock(),
        start_local_llm(
            MODELS[size],
            log_path=log_dir / "local-llm.log",
            extra_args=REPEATABLE if repeatable else PROMPT_CACHE,
        ) as server,
    ):
        yield {
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "local",
            "MEMSTREAM_LLM_MODEL": server.model,
            "MEMSTREAM_LLM_TIMEOUT": "900",
        }
