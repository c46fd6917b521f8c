"""Supervising the stage workers and the local LLM server: restart a crashed one with back-off,
give up on a crash loop.

`memstream up` runs one child process per stage (:class:`memstream.runtime.pipeline.Pipeline`). A
worker
that dies -- an uncaught error, the OOM killer, a SIGKILL -- used to go unnoticed: `up` slept on
while that stage's partitions were processed by nobody. :class:`Supervisor` watches the processes
and treats every exit of a stage that should be running as a crash, whatever its exit code, but
one: a live stage's worker that exits with `memstream.runtime.served.SWITCHED_EXIT` left for the
read model `memstream promote` switched to, and is started again at once, no crash counted.

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

Restarting is safe because every stage is at-least-once made effectively-once (docs/operations.md,
"Delivery guarantees"; the integration suite SIGKILLs workers mid-session): a restarted worker
rejoins its consumer group and goes on from the committed offsets and its own progress table.

The supervisor polls (``Popen.poll`` every half second) rather than waiting for SIGCHLD: the
children belong to :class:`~memstream.runtime.pipeline.StageProcess` objects that reap them
themselves,
`up` already owns the SIGTERM handler, and half a second of detection latency is nothing next to
a back-off of at least one. It runs in the caller's thread (`up`'s foreground loop), so Ctrl-C and
SIGTERM reach it as ``KeyboardInterrupt`` and leave through the caller's clean shutdown.

Every crash, restart and recovery is logged at WARNING (stage, how it exited, attempt, delay);
the CLI's logging writes WARNING to stderr, so a user of `memstream up` sees each as one line.

The local LLM server (`memstream.runtime.local.llm.LocalLLMServer`, when no endpoint is configured)
is
supervised the same way, under the same policy, as one more member named ``local-llm``: it was
unsupervised before, and extraction waited on a dead endpoint forever. It is restarted on the
same port (the workers' environment names it), without blocking the loop: the supervisor spawns
it (`LoopbackServer.spawn`) and polls until it answers again (``/health``,
`memstream.runtime.local.llama_server`). Meanwhile the
extraction stages wait the outage out (`streams.retrying`: an unreachable LLM is retried with
back-off, never dead-lettered, never advanced past), so a restart loses and doubles nothing.
When it keeps dying, the supervisor stops every stage and raises :class:`ServerGaveUp`.
`state()` says, per member, how many restarts it had and whether it is up; `memstream up`
writes that to ``data_dir/up.json`` for `memstream status`.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tenacity import RetryCallState, Retrying
from tenacity.wait import wait_base, wait_exponential_jitter

from memstream.runtime.pipeline import Pipeline, StageFailed
from memstream.runtime.served import SWITCHED_EXIT
from memstream.runtime.servers import LoopbackServer

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


class ServerGaveUp(StageFailed):
    """A supervised server (the local LLM) kept dying; every stage was stopped. The message has
    the server's log tail."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(message)
        self.server = server


class Supervised(Protocol):
    """What the supervisor needs of a child process (a stage worker, a wrapped server)."""

    @property
    def running(self) -> bool: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def log_path(self) -> Path: ...

    def start(self) -> object:
        """Start it again without waiting for it to be ready."""
        ...

    def is_ready(self) -> bool: ...

    def log_tail(self, lines: int = ...) -> str: ...


class SupervisedServer:
    """A :class:`~memstream.runtime.servers.LoopbackServer` as the supervisor restarts it: spawned
    on its
    own port, ready once it answers its protocol again."""

    def __init__(self, server: LoopbackServer) -> None:
        self.server = server

    @property
    def running(self) -> bool:
        return self.server.running

    @property
    def returncode(self) -> int | None:
        return self.server.returncode

    @property
    def log_path(self) -> Path:
        return self.server.log_path

    def start(self) -> None:
        self.server.spawn()

    def is_ready(self) -> bool:
        return self.server.is_ready()

    def log_tail(self, lines: int = 40) -> str:
        return self.server.log_tail(lines)


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
    """Restarts the crashed stages (and servers) of a running pipeline, or stops it and raises
    StageGaveUp / ServerGaveUp.

    Call :meth:`run` in the foreground, or :meth:`check` from a loop of your own. Not thread-safe:
    nothing else may start or stop the pipeline's processes meanwhile.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        policy: RestartPolicy | None = None,
        *,
        servers: Mapping[str, LoopbackServer] | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval: float = 0.5,
        on_switch: Callable[[], None] | None = None,
    ) -> None:
        """`servers` (name: running server) are supervised beside the stages, e.g.
        ``{"local-llm": server}``. `on_switch` is called before a stage that left for the newly
        served lineage is started again (`memstream.runtime.served.LocalModelFollower`)."""
        self.pipeline = pipeline
        self.on_switch = on_switch
        self.policy = policy or RestartPolicy()
        self.clock = clock
        self.interval = interval
        self.servers = {name: SupervisedServer(server) for name, server in (servers or {}).items()}
        self.members: dict[str, Supervised] = {**pipeline.processes, **self.servers}
        now = clock()
        self.started_at = dict.fromkeys(self.members, now)
        self.history = {name: CrashHistory() for name in self.members}
        self.restarts = dict.fromkeys(self.members, 0)
        self.last_exit: dict[str, str] = {}
        self._due: dict[str, float] = {}  # crashed members and when to start them again
        self._recovering: set[str] = set()  # restarted, not ready again yet
        self._changes = 0

    def run(self, report: Callable[[dict[str, Any]], None] | None = None) -> None:
        """Supervise until a member is given up on (raises); never returns. `report` is called
        with :meth:`state` at the start and after every crash, restart and recovery."""
        seen = -1
        while True:
            self.check()
            if report is not None and seen != self._changes:
                seen = self._changes
                report(self.state())
            time.sleep(self.interval)

    def check(self) -> None:
        """One look at every member: note crashes, start those whose back-off is over."""
        now = self.clock()
        for name, member in self.members.items():
            if name in self._due:
                if now >= self._due[name]:
                    self._restart(name, member, now)
            elif not member.running and self._left_for_the_served(name, member):
                self._switched(name, now)
            elif not member.running:
                self._crashed(name, member, now, describe_exit(member.returncode))
            elif name in self._recovering and member.is_ready():
                self._recovering.discard(name)
                self._changes += 1
                log.warning("%s is ready again", self._label(name))

    def state(self) -> dict[str, dict[str, Any]]:
        """Per member: ``restarts``, ``up`` (running and not waiting to be ready again) and how
        it last exited (``last_exit``), as JSON."""
        return {
            name: {
                "restarts": self.restarts[name],
                "up": name not in self._due and name not in self._recovering,
                "last_exit": self.last_exit.get(name),
            }
            for name in self.members
        }

    def _label(self, name: str) -> str:
        return f"server {name}" if name in self.servers else f"stage {name}"

    def _crashed(self, name: str, member: Supervised, now: float, how: str) -> None:
        self._recovering.discard(name)
        self._changes += 1
        self.last_exit[name] = how
        uptime = now - self.started_at[name]
        decision, self.history[name] = self.policy.decide(
            self.history[name], started_at=self.started_at[name], crashed_at=now
        )
        label = self._label(name)
        if isinstance(decision, GiveUp):
            self.pipeline.stop()
            count = (
                f" (crash {decision.crashes} within {self.policy.window:.0f}s)"
                if decision.crashes > 1
                else ""
            )
            message = (
                f"{label} {how} after {uptime:.1f}s{count}; giving up and stopping every stage. "
                f"Last lines of {member.log_path}:\n{member.log_tail()}"
            )
            if name in self.servers:
                raise ServerGaveUp(name, message)
            raise StageGaveUp(name, message)
        log.warning(
            "%s %s after %.1fs; restarting it in %.1fs (attempt %d)",
            label,
            how,
            uptime,
            decision.delay,
            decision.attempt,
        )
        self._due[name] = now + decision.delay

    def _left_for_the_served(self, name: str, member: Supervised) -> bool:
        return name not in self.servers and member.returncode == SWITCHED_EXIT

    def _switched(self, name: str, now: float) -> None:
        """A live stage's worker left for the newly served lineage: start it again at once, no
        crash counted (`memstream.runtime.served`)."""
        self._recovering.discard(name)
        self._changes += 1
        self.last_exit[name] = "left for the newly served read model"
        log.warning("%s left for the newly served read model; starting it again", name)
        if self.on_switch is not None:
            self.on_switch()
        self._due[name] = now

    def replace_server(self, name: str, server: LoopbackServer) -> None:
        """Supervise `server` as `name` from now on, in place of the one before (which the
        caller stops afterwards: its exit is no longer watched)."""
        self.servers[name] = self.members[name] = SupervisedServer(server)
        self._due.pop(name, None)
        self._recovering.discard(name)

    def _restart(self, name: str, member: Supervised, now: float) -> None:
        del self._due[name]
        self.started_at[name] = now
        self.restarts[name] += 1
        self._changes += 1
        try:
            member.start()
        except Exception as exc:  # a port taken, a file gone: a failed start is a crash
            self._crashed(name, member, now, f"could not be started ({exc})")
            return
        self._recovering.add(name)
        log.warning("%s restarted (attempt %d)", self._label(name), self.history[name].streak)
