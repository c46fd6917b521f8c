"""Faults a run injects, each a function of the run's `Target`; a seeded schedule composes them.

Every fault waits until what it broke is back (a restarted worker is ready again, a restarted
server answers), so the next fault starts from a running pipeline, and returns what it did.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memstream.runtime.pipeline import StageProcess
from streams.faults import ENVIRONMENT_VARIABLE
from tests.support.fault.llm import WorkloadLLM
from tests.support.pipeline import PipelineHarness
from tests.support.scripted_llm import HTTPFailure, ScriptedLLM

log = logging.getLogger(__name__)

BUSY_STAGES = ("window", "extract:semantic", "projector")
"""The stages with work in a fault run of the semantic type (the only type enabled); a run of a
custom type has its own extraction stage instead (`Target.busy_stages`)."""
READY_TIMEOUT = 240.0


@dataclass
class Target:
    """What the faults act on. `database` and `broker` are set only when the run owns them."""

    harness: PipelineHarness
    llm: ScriptedLLM
    answers: WorkloadLLM
    rng: random.Random
    database: Any = None
    broker: Any = None
    extra_workers: list[StageProcess] = field(default_factory=list)
    removed_workers: list[StageProcess] = field(default_factory=list)
    """Later workers stopped for good (`remove_worker`); the run does not restart them."""
    retired: set[str] = field(default_factory=set)
    """Stages whose first worker was killed for good (a second worker carries them)."""
    log: list[dict[str, Any]] = field(default_factory=list)
    memory_type: str = "semantic"
    """The one memory type the run extracts (a built-in one, or a declared custom one)."""

    @property
    def busy_stages(self) -> tuple[str, ...]:
        """The stages with work: the window, the memory type's extraction, the projector."""
        return ("window", f"extract:{self.memory_type}", "projector")

    def record(self, kind: str, **details: Any) -> None:
        entry = {"fault": kind, "at": round(time.monotonic(), 1), **details}
        log.warning("fault: %s", entry)
        self.log.append(entry)


Fault = Callable[[Target], None]


def start_worker(target: Target, stage: str) -> StageProcess:
    """Start one more worker of `stage` (its consumer group: the partitions are shared anew)."""
    harness = target.harness
    count = 1 + sum(1 for extra in target.extra_workers if extra.stage == stage)
    extra = StageProcess(
        stage,
        harness.pipeline.processes[stage].environment,
        harness.log_dir,
        log_name=f"worker-{stage.replace(':', '-')}-{count + 1}.log",
    )
    extra.start()
    target.extra_workers.append(extra)
    _wait_ready(extra)
    return extra


def kill_any_worker() -> Fault:
    """SIGKILL a random worker of a busy stage — the first or a later one — and start it again:
    its partitions move to the others meanwhile, and back."""

    def fault(target: Target) -> None:
        workers = [target.harness.pipeline.processes[stage] for stage in target.busy_stages]
        workers += [extra for extra in target.extra_workers if extra.running]
        chosen = target.rng.choice(workers)
        if chosen is target.harness.pipeline.processes[chosen.stage]:
            target.retired.discard(chosen.stage)
        chosen.kill()
        chosen.start()
        _wait_ready(chosen)
        target.record("kill", stage=chosen.stage, worker=chosen.log_path.name)

    return fault


def add_worker(stage: str | None = None) -> Fault:
    """Another worker joins a busy stage under load (a rebalance)."""

    def fault(target: Target) -> None:
        chosen = stage or target.rng.choice(target.busy_stages)
        extra = start_worker(target, chosen)
        target.record("rebalance", stage=chosen, added=extra.log_path.name)

    return fault


def remove_worker(stage: str | None = None) -> Fault:
    """A later worker of a busy stage leaves for good under load (SIGTERM: it stops as an
    operator scaling in would stop it; a rebalance)."""

    def fault(target: Target) -> None:
        running = [e for e in target.extra_workers if e.running and e.stage in target.busy_stages]
        if stage is not None:
            running = [e for e in running if e.stage == stage]
        if not running:
            target.record("rebalance", removed=None)
            return
        chosen = target.rng.choice(running)
        target.extra_workers.remove(chosen)
        target.removed_workers.append(chosen)
        chosen.stop()
        target.record("rebalance", stage=chosen.stage, removed=chosen.log_path.name)

    return fault


def kill_stage(stage: str | None = None) -> Fault:
    """SIGKILL one stage worker (a random one unless named) and start it again."""

    def fault(target: Target) -> None:
        chosen = stage or target.rng.choice(list(target.harness.pipeline.processes))
        target.retired.discard(chosen)
        target.harness.pipeline.restart(chosen, kill=True, timeout=READY_TIMEOUT)
        target.record("kill", stage=chosen)

    return fault


def kill_at(stage: str, point: str, wait: float = 90.0) -> Fault:
    """Restart `stage` with a fault point (`streams.faults`) that SIGKILLs it at an exact
    moment; once it died there (or after `wait` seconds), start it without."""

    def fault(target: Target) -> None:
        process = target.harness.pipeline.processes[stage]
        target.retired.add(stage)  # it is meant to die at the fault point
        process.kill()
        process.environment[ENVIRONMENT_VARIABLE] = point
        process.start()
        deadline = time.monotonic() + wait
        while process.running and time.monotonic() < deadline:
            time.sleep(0.2)
        reached = not process.running
        process.kill()
        process.environment.pop(ENVIRONMENT_VARIABLE)
        if process.environment.get("MEMSTREAM_PRODUCER_MAX_BATCH_SIZE") == "1":  # on Tansu
            # Once in five short runs on Tansu, a projector started again at once after dying
            # here (its second death within seconds) joined its group, said it was ready and
            # consumed nothing for minutes; not seen on Apache Kafka, not yet diagnosed
            # (docs/architecture.md, "Known limits"). Let the dead members' sessions expire.
            time.sleep(float(process.environment.get("MEMSTREAM_SESSION_TIMEOUT", "3")) + 2)
        process.start()
        target.retired.discard(stage)
        target.harness.pipeline.wait_ready(READY_TIMEOUT, [stage])
        target.record("kill", stage=stage, point=point, reached=reached)

    return fault


def kill_after_result_sent(memory_type: str = "semantic") -> Fault:
    """A memory type's extractor killed between writing an extraction result and its
    progress."""
    return kill_at(f"extract:{memory_type}", "extraction.after_result_sent")


def kill_after_projecting_a_result() -> Fault:
    """The projector killed between projecting a result that reinforced a memory (the
    reinforcement is in MongoDB) and storing its applied offset: the result comes again."""
    return kill_at("projector", "projector.after_project:MemoryReinforced")


def second_worker_then_kill(stage: str | None = None, overlap: float = 10.0) -> Fault:
    """Start a second worker of a stage (same consumer group), let both run, SIGKILL the first:
    its partitions move to the second, which carries the stage until the run ends (the first is
    started again only by a later fault, if any)."""

    def fault(target: Target) -> None:
        chosen = stage or target.rng.choice(target.busy_stages)
        harness = target.harness
        start_worker(target, chosen)
        time.sleep(overlap)
        target.retired.add(chosen)
        harness.pipeline.processes[chosen].kill()
        target.record("kill", stage=chosen, two_workers=True)

    return fault


def database_outage(seconds: float) -> Fault:
    """Stop the run's own SecantusDB for `seconds` and start it again on the same port."""

    def fault(target: Target) -> None:
        target.database.stop()
        time.sleep(seconds)
        target.database.start()
        target.record("outage", what="database", seconds=seconds)

    return fault


def broker_restart(seconds: float) -> Fault:
    """Stop the run's own (durable) broker for `seconds`, start it on the same workdir and port."""

    def fault(target: Target) -> None:
        target.broker.stop()
        time.sleep(seconds)
        target.broker.start()
        target.record("outage", what="broker", seconds=seconds)

    return fault


def llm_outage(seconds: float, mode: str = "500") -> Fault:
    """The LLM and the embedder answer HTTP 500 (`mode="500"`) or refuse connections
    (`"refused"`) for `seconds`."""

    def fault(target: Target) -> None:
        if mode == "refused":
            target.llm.stop()
            time.sleep(seconds)
            target.llm.start()
        else:
            target.llm.failing = HTTPFailure(500, "scripted outage")
            time.sleep(seconds)
            target.llm.failing = None
        target.record("outage", what=f"llm {mode}", seconds=seconds)

    return fault


def llm_slow(seconds: float, latency: float = 1.5) -> Fault:
    def fault(target: Target) -> None:
        target.llm.latency = latency
        time.sleep(seconds)
        target.llm.latency = 0.0
        target.record("outage", what="llm slow", seconds=seconds, latency=latency)

    return fault


def llm_garbage(seconds: float) -> Fault:
    """Every first extraction attempt is answered with garbage for `seconds` (the retries get
    the right answer: nothing may be dead-lettered for it)."""

    def fault(target: Target) -> None:
        target.answers.garbling = True
        time.sleep(seconds)
        target.answers.garbling = False
        target.record("outage", what="llm garbage", seconds=seconds)

    return fault


def _wait_ready(process: StageProcess, timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not process.is_ready():
        if not process.running or time.monotonic() > deadline:
            raise RuntimeError(f"second {process.stage} worker not ready:\n{process.log_tail()}")
        time.sleep(0.2)
