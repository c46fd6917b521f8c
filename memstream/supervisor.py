"""Supervising the stage workers: restart a crashed stage with back-off, give up on a crash loop.

`memstream up` runs one child process per stage (:class:`memstream.runtime.Pipeline`). A worker
that dies -- an uncaught error, the OOM killer, a SIGKILL -- used to go unnoticed: `up` slept on
while that stage's partitions were processed by nobody. :class:`Supervisor` watches the processes
and treats every exit of a stage that should be running as a crash, whatever its exit code.

What happens after a crash is decided by :meth:`RestartPolicy.decide`, a pure function of what the
policy remembers of the stage and the crash's times (no clock is read there). In order:

1. A stage that had stayed up ``healthy_after`` seconds (60) before it crashed starts a fresh
   streak: its back-off goes back to the first step.
2. The crash that makes ``max_crashes`` (5) within the last ``window`` seconds (300) gives up:
   the supervisor stops every stage and raises :class:`StageGaveUp` with the stage's log tail,
   and `memstream up` exits 1. A stage that dies every minute is in a loop as much as one that
   dies at once (its streak keeps resetting, the window still counts it). Restarting such a
   stage forever would hide a bug or a broken dependency behind a `memstream up` that looks alive.
3. Otherwise the stage is started again after the streak's back-off: 1 s, 2 s, 4 s, 8 s ...
   capped at 30 s, plus up to 1 s of jitter (stages that died together, say when the broker went
   away, do not all come back at the same instant). The delay is tenacity's
   ``wait_exponential_jitter``, not arithmetic of ours; the strategy is a field of the policy, so
   tests inject ``wait_exponential`` for exact numbers.

With the defaults, a stage that dies at once is given up on after four restarts, about 15 s of
back-off plus four worker start-ups.

Restarting is safe because every stage is at-least-once made effectively-once (the README's
delivery guarantees; the integration suite SIGKILLs workers mid-session): a restarted worker
rejoins its consumer group and goes on from the committed offsets and its own progress table.

The supervisor polls (``Popen.poll`` every half second) rather than waiting for SIGCHLD: the
children belong to :class:`~memstream.runtime.StageProcess` objects that reap them themselves,
`up` already owns the SIGTERM handler, and half a second of detection latency is nothing next to
a back-off of at least one. It runs in the caller's thread (`up`'s foreground loop), so Ctrl-C and
SIGTERM reach it as ``KeyboardInterrupt`` and leave through the caller's clean shutdown.

Every crash, restart and recovery is logged at WARNING (stage, how it exited, attempt, delay);
the CLI's logging writes WARNING to stderr, so a user of `memstream up` sees each as one line.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tenacity import RetryCallState, Retrying
from tenacity.wait import wait_base, wait_exponential_jitter

from memstream.runtime import Pipeline, StageFailed, StageProcess

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Restart:
    """Start the stage again after `delay` seconds; `attempt` counts restarts in this streak."""

    attempt: int
    delay: float


@dataclass(frozen=True)
class GiveUp:
    """Stop everything: the stage crashed `crashes` times within the policy's window."""

    crashes: int


@dataclass(frozen=True)
class CrashHistory:
    """What the policy remembers of one stage between its crashes."""

    streak: int = 0
    """Crashes since the stage last stayed up `healthy_after` seconds."""
    recent: tuple[float, ...] = ()
    """When it crashed within the last `window` seconds (clock seconds, oldest first)."""


def _default_wait() -> wait_base:
    return wait_exponential_jitter(max=30, jitter=1)  # from 1 s, doubling


@dataclass(frozen=True)
class RestartPolicy:
    """When a crashed stage is restarted, and when the supervisor gives up (module docstring)."""

    max_crashes: int = 5
    """Give up at this many crashes of one stage within `window` seconds (1: never restart)."""
    window: float = 300.0
    healthy_after: float = 60.0
    """Seconds a stage must have stayed up for its next crash to start a fresh back-off."""
    wait: wait_base = field(default_factory=_default_wait)
    """Back-off before restart n of a streak; any tenacity wait strategy."""

    def decide(
        self, history: CrashHistory, *, started_at: float, crashed_at: float
    ) -> tuple[Restart | GiveUp, CrashHistory]:
        """What to do about a crash at `crashed_at` of a run started at `started_at`."""
        healthy = crashed_at - started_at >= self.healthy_after
        streak = 1 if healthy else history.streak + 1
        recent = (*(t for t in history.recent if crashed_at - t < self.window), crashed_at)
        after = CrashHistory(streak, recent)
        if len(recent) >= self.max_crashes:
            return GiveUp(len(recent)), after
        return Restart(streak, self.delay(streak)), after

    def delay(self, attempt: int) -> float:
        """The wait strategy's delay before restart `attempt` (1 for the first)."""
        state = RetryCallState(Retrying(), fn=None, args=(), kwargs={})
        state.attempt_number = attempt
        return float(self.wait(state))


FAIL_FAST = RestartPolicy(max_crashes=1)
"""Never restart: the first crash stops everything (`memstream demo`)."""


class StageGaveUp(StageFailed):
    """A stage kept crashing; every stage was stopped. The message has the stage's log tail."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


def describe_exit(returncode: int | None) -> str:
    """`exited with code 1`, `was killed by SIGKILL`."""
    if returncode is None:
        return "exited"
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


class Supervisor:
    """Restarts the crashed stages of a running pipeline, or stops it and raises StageGaveUp.

    Call :meth:`run` in the foreground, or :meth:`check` from a loop of your own. Not thread-safe:
    nothing else may start or stop the pipeline's processes meanwhile.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        policy: RestartPolicy | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        interval: float = 0.5,
    ) -> None:
        self.pipeline = pipeline
        self.policy = policy or RestartPolicy()
        self.clock = clock
        self.interval = interval
        now = clock()
        self.started_at = {stage: now for stage in pipeline.processes}
        self.history = {stage: CrashHistory() for stage in pipeline.processes}
        self.restarts = dict.fromkeys(pipeline.processes, 0)
        self._due: dict[str, float] = {}  # crashed stages and when to start them again
        self._recovering: set[str] = set()  # restarted, ready marker not seen yet

    def run(self) -> None:
        """Supervise until a stage is given up on (raises StageGaveUp); never returns."""
        while True:
            self.check()
            time.sleep(self.interval)

    def check(self) -> None:
        """One look at every stage: note crashes, start stages whose back-off is over."""
        now = self.clock()
        for stage, process in self.pipeline.processes.items():
            if stage in self._due:
                if now >= self._due[stage]:
                    self._restart(stage, process, now)
            elif not process.running:
                self._crashed(stage, process, now)
            elif stage in self._recovering and process.is_ready():
                self._recovering.discard(stage)
                log.warning("stage %s is ready again", stage)

    def _crashed(self, stage: str, process: StageProcess, now: float) -> None:
        self._recovering.discard(stage)
        how = describe_exit(process.returncode)
        uptime = now - self.started_at[stage]
        decision, self.history[stage] = self.policy.decide(
            self.history[stage], started_at=self.started_at[stage], crashed_at=now
        )
        if isinstance(decision, GiveUp):
            self.pipeline.stop()
            count = (
                f" (crash {decision.crashes} within {self.policy.window:.0f}s)"
                if decision.crashes > 1
                else ""
            )
            raise StageGaveUp(
                stage,
                f"stage {stage} {how} after {uptime:.1f}s{count}; giving up and stopping every "
                f"stage. Last lines of {process.log_path}:\n{process.log_tail()}",
            )
        log.warning(
            "stage %s %s after %.1fs; restarting it in %.1fs (attempt %d)",
            stage,
            how,
            uptime,
            decision.delay,
            decision.attempt,
        )
        self._due[stage] = now + decision.delay

    def _restart(self, stage: str, process: StageProcess, now: float) -> None:
        del self._due[stage]
        process.start()
        self.started_at[stage] = now
        self.restarts[stage] += 1
        self._recovering.add(stage)
        log.warning("stage %s restarted (attempt %d)", stage, self.history[stage].streak)
