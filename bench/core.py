"""What every benchmark suite reports, and the servers a run shares.

A suite is a module in `bench/` with a ``run(context: BenchContext) -> SuiteResult`` function and
is listed in :data:`bench.__main__.SUITES`. It measures our figure and a baseline in the same run
(these machines are shared and noisy) and returns one :class:`Figure` per row of the report, plus
whatever raw numbers it wants kept in the JSON (every round, every sample).

``python -m bench all [--quick]`` runs every suite and writes ``bench/results/<name>.json`` and
``.md``; ``--update-docs`` copies the table into BENCHMARKS.md.
"""

from __future__ import annotations

import contextlib
import operator
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from memstream.runtime.servers import ApacheKafkaBroker, LoopbackServer, SecantusServer, TansuBroker

BrokerKind = Literal["apache", "tansu"]
BROKER_NAMES: dict[str, str] = {
    "apache": "Apache Kafka 4.1.1 (embedded default, durable)",
    "tansu": "Tansu (embedded --ephemeral, in memory)",
}

_AIMS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
}


@dataclass(frozen=True)
class Aim:
    """The target for a figure's ratio, e.g. ``Aim(">=", 0.9)``."""

    op: Literal[">=", "<="]
    value: float

    def met_by(self, ratio: float) -> bool:
        return _AIMS[self.op](ratio, self.value)

    def __str__(self) -> str:
        return f"{'≥' if self.op == '>=' else '≤'} {self.value:g}"


@dataclass(frozen=True)
class Figure:
    """One row of the report: our figure, the baseline's from the same run, and their ratio.

    ``ratio`` is always ``ours / baseline`` (so whether higher is better depends on the unit:
    turns/s up, seconds and tokens down; the aim says which). A figure without a baseline (model
    quality, footprint) has ``baseline = None`` and no ratio.
    """

    benchmark: str
    setting: str
    unit: str
    ours: float
    baseline: float | None = None
    baseline_name: str = ""
    aim: Aim | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline == 0:
            return None
        return self.ours / self.baseline

    @property
    def met(self) -> bool | None:
        ratio = self.ratio
        if self.aim is None or ratio is None:
            return None
        return self.aim.met_by(ratio)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["aim"] = str(self.aim) if self.aim else None
        data["ratio"] = self.ratio
        data["met"] = self.met
        return data


@dataclass
class SuiteResult:
    figures: list[Figure]
    raw: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    """Parts of the suite that failed while others still gave their figures (the run then
    fails too, and the report lists them)."""


@dataclass
class BenchContext:
    """A run's settings and the servers its suites share (started on first use, stopped at the
    end of the run)."""

    quick: bool
    brokers: tuple[BrokerKind, ...]
    workdir: Path
    options: dict[str, Any] = field(default_factory=dict)
    results: dict[str, SuiteResult] = field(default_factory=dict)
    """The suites this run has finished so far, by name (a suite that reports another's figures,
    like `scale`, takes them from here instead of measuring them twice)."""
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _servers: dict[str, LoopbackServer] = field(default_factory=dict)

    def broker(self, kind: BrokerKind) -> TansuBroker | ApacheKafkaBroker:
        """The run's broker of this kind; suites use their own topic prefix on it."""
        if kind not in self._servers:
            folder = self.workdir / kind
            server: TansuBroker | ApacheKafkaBroker = (
                TansuBroker(folder) if kind == "tansu" else ApacheKafkaBroker(folder)
            )
            self._servers[kind] = self._stack.enter_context(server)
        found = self._servers[kind]
        assert isinstance(found, TansuBroker | ApacheKafkaBroker)
        return found

    def mongo(self) -> SecantusServer:
        """The run's database server; suites use their own database name on it."""
        if "mongo" not in self._servers:
            self._servers["mongo"] = self._stack.enter_context(
                SecantusServer(self.workdir / "mongo")
            )
        found = self._servers["mongo"]
        assert isinstance(found, SecantusServer)
        return found

    def server_pids(self) -> dict[str, int]:
        """Process ids of the servers started so far (for footprint measurements)."""
        pids: dict[str, int] = {}
        for name, server in self._servers.items():
            pid = getattr(server, "pid", None)
            if isinstance(pid, int):
                pids[name] = pid
        return pids

    def suite_result(self, name: str, run: Callable[[BenchContext], SuiteResult]) -> SuiteResult:
        """Suite `name`'s result from this run, running it (with `run`) if it has not run."""
        if name not in self.results:
            self.results[name] = run(self)
        return self.results[name]

    def close(self) -> None:
        self._stack.close()


@contextlib.contextmanager
def bench_context(
    *, quick: bool, brokers: Sequence[BrokerKind], options: dict[str, Any] | None = None
) -> Iterator[BenchContext]:
    with tempfile.TemporaryDirectory(prefix="memstream-bench-") as scratch:
        context = BenchContext(quick, tuple(brokers), Path(scratch), dict(options or {}))
        try:
            yield context
        finally:
            context.close()


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0 to 100) by linear interpolation, as numpy computes it."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class Stopwatch:
    """``with Stopwatch() as watch: ...; watch.seconds``"""

    seconds: float = 0.0

    def __enter__(self) -> Stopwatch:
        self._started = time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        self.seconds = time.perf_counter() - self._started


def alternate(rounds: int) -> Iterator[tuple[int, bool]]:
    """(round, baseline_first) pairs: which side runs first alternates from round to round, so
    neither side always gets the warmer caches."""
    for index in range(rounds):
        yield index, index % 2 == 0
