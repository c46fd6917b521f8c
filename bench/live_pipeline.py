"""The whole pipeline running for a benchmark: every stage worker, as `memstream up` runs them.

    pipeline = live_pipeline(context, "tansu")     # started once per run and broker, then shared

The stage workers are `memstream.runtime.pipeline.Pipeline` child processes on the run's broker and
database (own topic prefix, consumer groups and database), talking to a `bench.timed_llm`
server (scripted answers after a model-like delay, every request timed). The freshness and
footprint suites share one per broker, so the workers' start (tens of seconds on 2 cores) is
paid once; the run's context stops it before the broker and the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core import BenchContext, BrokerKind, Stopwatch
from bench.llama_timings import LLAMA_LOCK, llama_lock
from bench.timed_llm import TimedLLMServer
from memstream.config import Settings, load_settings
from memstream.runtime.local.llm import LocalLLMServer
from memstream.runtime.pipeline import (
    KAFKA_ENVIRONMENT,
    TANSU_ENVIRONMENT,
    Pipeline,
    pipeline_stages,
)
from memstream.runtime.topics import ensure_topics

CHAT_DELAY = 0.5
"""Seconds the scripted LLM waits before each chat answer: a stand-in for a model (the local
1.5B model takes several seconds per extraction on 2 cores; a hosted one about this)."""
EMBED_DELAY = 0.02
"""Seconds before each embeddings answer (a hosted embedding call)."""


@dataclass
class LivePipeline:
    """A started pipeline with its LLM server and the settings a client needs."""

    broker: BrokerKind
    settings: Settings
    environment: dict[str, str]
    pipeline: Pipeline
    llm: TimedLLMServer
    start_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    def worker_pids(self) -> dict[str, int]:
        pids = {}
        for stage, process in self.pipeline.processes.items():
            if process.pid is not None:
                pids[stage] = process.pid
        return pids


_CACHE: dict[int, dict[str, LivePipeline]] = {}
"""The started pipelines of each running context (by `id`), forgotten when it closes."""


def worker_environment(
    broker: BrokerKind, bootstrap: str, mongo_uri: str, llm_url: str, run_id: str, config: Path
) -> dict[str, str]:
    """What the stage workers and the benchmark's client are told (one memory type: semantic,
    the one the scripted LLM answers)."""
    return {
        "MEMSTREAM_CONFIG": str(config),
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "MONGODB_URI": mongo_uri,
        "MONGODB_DATABASE": f"bench_{run_id}",
        "MEMSTREAM_TOPIC_PREFIX": f"bench-{run_id}.",
        "MEMSTREAM_GROUP_PREFIX": f"bench-{run_id}-",
        "OPENAI_BASE_URL": llm_url,
        "OPENAI_API_KEY": "bench",
        "MEMSTREAM_LLM_MODEL": "scripted-llm",
        "MEMSTREAM_EMBEDDING_PROVIDER": "openai",
        "MEMSTREAM_EMBEDDING_MODEL": "scripted-embedding",
        "MEMSTREAM_ENABLED_EXTRACTIONS": "semantic",
        **(TANSU_ENVIRONMENT if broker == "tansu" else KAFKA_ENVIRONMENT),
    }


@contextlib.contextmanager
def started_pipeline(
    broker: BrokerKind,
    bootstrap: str,
    mongo_uri: str,
    workdir: Path,
    *,
    environment: Mapping[str, str] | None = None,
) -> Iterator[LivePipeline]:
    """A pipeline on this broker and database with its own timed LLM server, stopped on exit."""
    run_id = uuid.uuid4().hex[:8]
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "bench-config.yaml"
    config.write_text("# settings come from the environment\n")
    with TimedLLMServer(workdir / "llm", chat_delay=CHAT_DELAY, embed_delay=EMBED_DELAY) as llm:
        env = {
            **worker_environment(broker, bootstrap, mongo_uri, llm.base_url, run_id, config),
            **(environment or {}),
        }
        settings = load_settings(environ=env)
        asyncio.run(ensure_topics(settings.kafka))
        pipeline = Pipeline(pipeline_stages(settings), env, workdir / "logs")
        print(f"   starting the pipeline on {broker} …", file=sys.stderr, flush=True)
        with Stopwatch() as watch:
            pipeline.start(timeout=300)
        print(f"   pipeline ready in {watch.seconds:.0f} s", file=sys.stderr, flush=True)
        try:
            yield LivePipeline(broker, settings, env, pipeline, llm, watch.seconds)
        finally:
            pipeline.stop()


def live_pipeline(context: BenchContext, kind: BrokerKind) -> LivePipeline:
    """The run's scripted-LLM pipeline on broker `kind`, started on first use."""
    if id(context) not in _CACHE:
        _CACHE[id(context)] = {}
        context._stack.callback(_CACHE.pop, id(context), None)
    pipelines = _CACHE[id(context)]
    if kind not in pipelines:
        bootstrap = context.broker(kind).bootstrap_servers
        mongo = context.mongo()
        # Entered after the broker and the database: the context stops it before them.
        pipelines[kind] = context._stack.enter_context(
            started_pipeline(kind, bootstrap, mongo.uri, context.workdir / f"pipeline-{kind}")
        )
    return pipelines[kind]


def local_model_available(size: str) -> str | None:
    """Why the local model `size` cannot run here, or None when it can."""
    from memstream.runtime.local.llm import llama_cpp_available
    from memstream.runtime.local.weights import MODELS, part_paths

    if size == "none":
        return "--local-model none"
    if not llama_cpp_available():
        return "llama-cpp-python is not installed (memstream[local])"
    try:
        from memstream.runtime.local.weights import _verified, default_cache_dir

        spec = MODELS[size]
        if not _verified(default_cache_dir() / spec.filename, spec):
            part_paths(spec)
    except Exception as error:
        return str(error)
    return None


@contextlib.contextmanager
def local_model(size: str, log_dir: Path) -> Iterator[LocalLLMServer]:
    """The local llama.cpp model `size` ("small"/"large") as `memstream up` starts it (prompt
    cache on), under the machine's llama lock."""
    from memstream.runtime.llm_choice import PROMPT_CACHE
    from memstream.runtime.local.llm import start_local_llm
    from memstream.runtime.local.weights import MODELS

    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"   waiting for {LLAMA_LOCK} …", file=sys.stderr, flush=True)
    with (
        llama_lock(),
        start_local_llm(
            MODELS[size], log_path=log_dir / "local-llm.log", extra_args=PROMPT_CACHE
        ) as server,
    ):
        print(f"   local model {server.model} ready", file=sys.stderr, flush=True)
        yield server
