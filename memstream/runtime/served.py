"""The live stages follow the served lineage (docs/architecture.md, "Promotion").

A worker of a memory type's stage or of the projector started without `--shadow` runs the
lineage the deployment serves: the live one as configured, or the promoted shadow's (its
extractor, database, groups and results topics; `memstream.promotion.lineage`). It folds the
serving topic at start (`lineage_of_the_served`) and then looks at the deployment's database
every `LOOK_SECONDS`: when the served lineage changes it exits with `SWITCHED_EXIT`, and its
supervisor (`memstream up`'s, or systemd's, Kubernetes'…) starts it again, into the new one.

Exiting mid-work loses nothing: progress is committed only for acknowledged work, so what was in
flight is decided again by the next worker of that lineage (`streams.consuming`). The lineage left
keeps its groups' offsets, so switching back resumes it where it stopped and it catches up from
the log.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tenacity import RetryCallState

from handlers.serving import Served
from memstream.config import Settings
from memstream.promotion.lineage import deployment_database, served_environment

if TYPE_CHECKING:
    from memstream.runtime.local.llm import LocalLLMServer
    from memstream.runtime.pipeline import Pipeline
    from memstream.runtime.servers import LoopbackServer

log = logging.getLogger(__name__)

LOCAL_LLM = "local-llm"
"""The local LLM server's name among the supervised members."""

SWITCHED_EXIT = 75
"""A live stage's worker exits with this code when the served lineage changed (EX_TEMPFAIL):
start it again. `memstream.runtime.supervisor` does so at once, not as a crash."""

LOOK_SECONDS = 2.0


def follows_the_served(stage: str) -> bool:
    """Whether the stage belongs to a lineage (a memory type's stage, the projector); the window
    promotes the snapshots every lineage reads."""
    return stage == "projector" or stage.startswith("extract:")


def lineage_of_the_served(settings: Settings) -> tuple[Served, dict[str, str]]:
    """The served lineage (the fold of the serving topic, stored) and the environment that
    turns the deployment's settings into its."""
    from aiokafka.errors import KafkaError
    from pymongo.errors import PyMongoError
    from tenacity import Retrying, retry_if_exception_type, wait_exponential

    from memstream.promotion.switches import synced

    def waiting(state: RetryCallState) -> None:
        log.warning(
            "waiting for the broker and the database to look up the served read model: %s",
            state.outcome.exception() if state.outcome else None,
        )

    for attempt in Retrying(  # an outage at start is waited out, never a crash
        retry=retry_if_exception_type((PyMongoError, KafkaError, OSError)),
        wait=wait_exponential(multiplier=1, max=15),
        before_sleep=waiting,
        reraise=True,
    ):
        with attempt:
            served = asyncio.run(synced(settings))
    return served, served_environment(settings, served)


def exit_when_switched(settings: Settings, served: Served, stage: str) -> threading.Thread:
    """Start a daemon thread that ends the process with `SWITCHED_EXIT` once the deployment
    serves another lineage than `served` (module doc)."""
    thread = threading.Thread(
        target=_watch, args=(settings, served, stage), name="served-lineage", daemon=True
    )
    thread.start()
    return thread


def _watch(settings: Settings, served: Served, stage: str) -> None:
    from pymongo import MongoClient
    from pymongo.errors import PyMongoError

    from memstream.promotion.pointer import read_served

    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongodb.uri, tz_aware=True)
    database = client[deployment_database(settings)]
    while True:
        time.sleep(LOOK_SECONDS)
        try:
            now = read_served(database)
        except PyMongoError as exc:  # an outage: waited out like every other
            log.warning("could not look up the served read model: %s", exc)
            continue
        if now.version > served.version:
            print(
                f"memstream worker {stage}: the served read model changed (version "
                f"{served.version} → {now.version}: {now.shadow or 'live'}, extractor "
                f"{now.extractor}); exiting to be started again into it",
                file=sys.stderr,
                flush=True,
            )
            os._exit(SWITCHED_EXIT)


def served_lineage_settings(settings: Settings) -> Settings:
    """The deployment's settings (a broker and a database configured) as the served lineage's
    workers run them: what `memstream up` chooses its local LLM by."""
    from memstream.runtime.pipeline import configured

    _, environment = lineage_of_the_served(settings)
    return configured(settings, environment)


class LocalModelFollower:
    """`memstream up`'s local LLM follows the served lineage: when a switch serves an extractor
    that runs another packaged model (`extractors.NAME.local_model`), the new model's server is
    started, the workers' environment pointed at it, the supervisor given it in place of the old
    one, and the old one stopped, before the workers that left start again
    (`memstream.runtime.supervisor.Supervisor`'s `on_switch`).

    `settings` are the deployment's as configured, with the broker's and the database's
    addresses but not the local LLM's: with its address they would name an endpoint, and no
    lineage would want a local model."""

    def __init__(
        self,
        settings: Settings,
        pipeline: Pipeline,
        server: LoopbackServer | None,
        log_dir: Path,
        replace: Callable[[str, LoopbackServer], None],
    ) -> None:
        self.settings = settings
        self.pipeline = pipeline
        self.server = server
        self.log_dir = log_dir
        self.replace = replace
        self._started: list[LocalLLMServer] = []

    def stop_own(self) -> None:
        """Stop the servers this follower started (`up`'s own stops with `up`)."""
        for server in self._started:
            server.stop()
        self._started.clear()

    def __call__(self) -> None:
        from memstream.runtime.llm_choice import (
            local_llm_worker_environment,
            local_server_args,
            local_spec,
            start_local_model,
            wants_local_llm,
        )
        from memstream.runtime.local.llm import LocalLLMServer
        from memstream.runtime.local.weights import MODEL_ENV

        if not isinstance(self.server, LocalLLMServer) or os.environ.get(MODEL_ENV):
            return  # an endpoint, or one GGUF file of the operator's: nothing to follow
        lineage = served_lineage_settings(self.settings)
        if not wants_local_llm(lineage):
            return
        spec = local_spec(lineage)
        if spec.alias == self.server.model:
            return
        started = start_local_model(spec, self.log_dir, extra_args=local_server_args(lineage))
        old, self.server = self.server, started
        self._started.append(self.server)
        environment = local_llm_worker_environment(self.server.base_url, self.server.model)
        for process in self.pipeline.processes.values():
            process.environment.update(environment)
        self.replace(LOCAL_LLM, self.server)
        old.stop()
        if old in self._started:
            self._started.remove(old)
        log.warning("the local LLM is now %s, the served extractor's", self.server.model)
