"""Resident memory (RSS) of the processes a benchmark runs, sampled in a background thread.

    with RssSampler({"window": pid, "broker": pid2}, interval=0.25) as sampler:
        ...                                       # the workload
    sampler.samples["window"]                     # MB, one value per sample

A component's RSS is its process's plus its children's (a server started through a wrapper
counts whole). Uses psutil (the `dev` and `bench` extras).
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Mapping, Sequence
from types import TracebackType

import psutil

MB = 1_000_000


def tree_rss(pid: int) -> float | None:
    """RSS of a process and its descendants, in MB (None once the process is gone)."""
    try:
        process = psutil.Process(pid)
        members = [process, *process.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0
    for member in members:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            continue
    return total / MB


class RssSampler:
    """Samples every component's RSS each `interval` seconds while inside the block."""

    def __init__(self, pids: Mapping[str, int], interval: float = 0.25) -> None:
        self.pids = dict(pids)
        self.interval = interval
        self.samples: dict[str, list[float]] = {name: [] for name in self.pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def sample(self) -> None:
        for name, pid in self.pids.items():
            value = tree_rss(pid)
            if value is not None:
                self.samples[name].append(value)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(10)
        self.sample()  # at least one sample, however short the block


def idle_and_peak(samples: Mapping[str, Sequence[float]], *, peak: bool) -> dict[str, float]:
    """Each component's median (idle) or largest (under load) sample, and their `total` (the
    sum of the components' figures: their peaks need not coincide, so it bounds the sum)."""
    figures = {
        name: (max(values) if peak else statistics.median(values))
        for name, values in samples.items()
        if values
    }
    figures["total"] = sum(figures.values())
    return figures
