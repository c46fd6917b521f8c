"""Scale: every figure of issue 22 ("cost that grows with traffic, not with history") in one run.

    python -m bench scale [--quick] [--brokers apache,tansu] [--scale-history H]

Each figure is a ratio against a baseline measured in the same run:

1. **Extraction vs a bare client** (`bench.scale_extraction`): 40 and 400 users (quick: 16) each
   flush one short session through the pipeline `memstream up` runs, against a stub LLM that
   answers every request after exactly 1 s; the same calls sent again by a bare aiohttp client
   with the pipeline's total in-flight limit (extraction workers x
   `MEMSTREAM_LLM_MAX_IN_FLIGHT`, 8). Unit: LLM calls/s, so the ratio is the bare client's time
   over the pipeline's. Aim ≥ 0.8.
2. **Two workers per memory type vs one**, same users, same stub, 8 partitions: a second
   `memstream worker --stage extract:<type>` per type in the same consumer groups. Unit:
   extractions (snapshot x type results) per second. Aim ≥ 1.7.
3. **Restart time and RSS at 10x the history** (`bench.scale_history`,
   `bench.scale_memory_history`): the window with H and 10H closed sessions, extract:semantic
   and the projector with H and 10H memories; H = 1,000 (quick: 30; `--scale-history H` to
   change it). Each stage is restarted 3 times at each size (quick: once); the figure is the
   median at 10H over the median at H. Aim ≤ 1.3.
4. **First search vs warm search** at 1k and 10k memories (aim ≤ 3): the search suite's figure
   (`bench/suites/search.py`, "search, first search / warm search"), taken from this run when
   `bench all` ran it already, else measured here by running that suite, once it measures it
   (`SEARCH_MEASURES_FIRST`); a search suite without it leaves figure 4 out (said in `raw`).
5. **The window vs a bare consume→produce loop** (aim ≥ 0.5), **the live projector and replay
   vs raw `bulk_write`** (aims ≥ 0.5 and ≥ 0.8): the window and projection suites' own figures,
   taken from this run when `bench all` ran them already, else measured here by their code.

Figures 1 to 3 run on every broker chosen; the quick (CI) profile runs them on the first broker of
`--brokers` only (figure 5 comes from the window and projection suites, on every broker). A
round or a restart that never finishes (records left unapplied at the quiet end of a partition
were seen before `streams.progress` re-read such tails: `bench.scale_stages.stalled`) is
counted with its timeout and its figure's note says STALLED; a part that fails outright is
listed in the suite's `errors` while the other parts keep their figures.
"""

from __future__ import annotations

import dataclasses
import sys
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from bench.core import Aim, BenchContext, BrokerKind, Figure, SuiteResult
from bench.scale_extraction import (
    LLM_SECONDS,
    MAX_IN_FLIGHT,
    PARTITIONS,
    calls_per_second,
    extraction_pipeline,
    pipeline_round,
)
from bench.scale_history import CATCH_UP_TIMEOUT, History, Restart, growth, window_history
from bench.scale_memory_history import memory_history

SEARCH_FIRST_VS_WARM = "first search / warm search"
"""Search-suite figures whose benchmark name contains this are reported here (figure 4)."""
SEARCH_MEASURES_FIRST = "FIRST_AIM_SIZES"
"""Defined by `bench.suites.search` once it measures the first search against the warm one
(the search part of issue 22); until then figure 4 is missing from this suite's report."""


@dataclass(frozen=True)
class Profile:
    users: tuple[int, ...]
    """Users of the extraction rounds (one session each), with one and two workers per type."""
    history: int
    """H: the restart figures compare H and 10H."""
    restarts: int
    """Restarts of each stage at each history size (the figures take their medians)."""
    every_broker: bool


QUICK = Profile(users=(16,), history=30, restarts=1, every_broker=False)
"""CI's profile: every part once, at sizes that run in about a minute."""
FULL = Profile(users=(40, 400), history=1_000, restarts=3, every_broker=True)


# ---- figures 1 and 2 ----------------------------------------------------------------------------


def extraction_rounds(
    context: BenchContext, kind: BrokerKind, users: Sequence[int]
) -> dict[str, Any]:
    """Every size with one worker per type, then again with two."""
    broker = context.broker(kind)
    rounds: dict[str, list[dict[str, Any]]] = {"one_worker": [], "two_workers": []}
    with extraction_pipeline(
        kind,
        bootstrap=broker.bootstrap_servers,
        mongo_uri=context.mongo().uri,
        workdir=context.workdir / f"scale-extraction-{kind}",
    ) as running:
        for count in users:
            rounds["one_worker"].append(pipeline_round(running, count, uuid.uuid4().hex[:8]))
        second = running.add_second_workers()
        for count in users:
            rounds["two_workers"].append(pipeline_round(running, count, uuid.uuid4().hex[:8]))
    return {"second_workers_ready_seconds": second, **rounds}


def round_stall_note(found: dict[str, Any]) -> str:
    """Says that a round stalled: not every result seen in time (counted with its timeout)."""
    if not found.get("stalled"):
        return ""
    return (
        f"; STALLED ({found['extraction_workers']} workers): {found['results']} of "
        f"{found['expected_results']} results after {found['seconds']:.0f} s, counted as that"
    )


def extraction_figures(kind: str, raw: dict[str, Any]) -> list[Figure]:
    figures = []
    for found in raw["one_worker"]:
        calls = found["calls"]["chat"] + found["calls"]["embeddings"]
        figures.append(
            Figure(
                "extraction, pipeline vs bare client",
                f"{kind}, {found['users']} users, {LLM_SECONDS:g} s stub LLM",
                "LLM calls/s",
                calls_per_second(calls, found["seconds"]),
                calls_per_second(calls, found["bare"]["seconds"]),
                f"bare aiohttp client, the same {calls} calls, "
                f"{found['in_flight_limit']} in flight",
                Aim(">=", 0.8),
                f"{found['seconds']:.1f} s vs {found['bare']['seconds']:.1f} s; at most "
                f"{found['max_in_flight_seen']} calls in flight "
                f"({found['extraction_workers']} workers x MEMSTREAM_LLM_MAX_IN_FLIGHT "
                f"{found['max_in_flight_setting']})" + round_stall_note(found),
            )
        )
    for one, two in zip(raw["one_worker"], raw["two_workers"], strict=True):
        figures.append(
            Figure(
                "two workers per memory type vs one",
                f"{kind}, {one['users']} users, {PARTITIONS} partitions, "
                f"{LLM_SECONDS:g} s stub LLM",
                "extractions/s",
                calls_per_second(two["results"], two["seconds"]),
                calls_per_second(one["results"], one["seconds"]),
                "one worker per type, the same workload",
                Aim(">=", 1.7),
                f"{two['seconds']:.1f} s vs {one['seconds']:.1f} s; at most "
                f"{two['max_in_flight_seen']} vs {one['max_in_flight_seen']} calls in flight"
                + round_stall_note(two)
                + round_stall_note(one),
            )
        )
    return figures


# ---- figure 3 -----------------------------------------------------------------------------------

HISTORY_UNITS = {
    "window": "closed sessions",
    "extract:semantic": "memories",
    "projector": "memories",
}


def history_restarts(
    context: BenchContext, kind: BrokerKind, history: int, repeats: int
) -> History:
    sizes = (history, 10 * history)
    broker = context.broker(kind)
    common: dict[str, Any] = {
        "bootstrap": broker.bootstrap_servers,
        "mongo_uri": context.mongo().uri,
        "sizes": sizes,
        "repeats": repeats,
    }
    window = window_history(kind, workdir=context.workdir / f"scale-window-{kind}", **common)
    memories = memory_history(kind, workdir=context.workdir / f"scale-memories-{kind}", **common)
    return History([*window.restarts, *memories.restarts], [*window.stalls, *memories.stalls])


def restarts_at(restarts: Sequence[Restart], like: Restart) -> int:
    return sum(1 for r in restarts if r.stage == like.stage and r.history == like.history)


def stall_note(small: Restart, large: Restart) -> str:
    """Says how many restarts stalled (counted with the catch-up timeout, a lower bound)."""
    if not small.stalled and not large.stalled:
        return ""
    return (
        f"; STALLED: {large.stalled} restarts at {large.history:,}, {small.stalled} at "
        f"{small.history:,} never caught up (counted as {CATCH_UP_TIMEOUT:.0f} s)"
    )


def history_figures(kind: str, restarts: Sequence[Restart]) -> list[Figure]:
    figures = []
    for stage, unit in HISTORY_UNITS.items():
        small, large = growth(restarts, stage)
        setting = f"{kind}, {large.history:,} vs {small.history:,} {unit}"
        baseline = f"the same at {small.history:,} {unit}"
        figures.append(
            Figure(
                f"restart time at 10x history, {stage}",
                setting,
                "s",
                large.caught_up_seconds,
                small.caught_up_seconds,
                baseline,
                Aim("<=", 1.3),
                f"start to the fresh workload's output, median of {restarts_at(restarts, large)}"
                f"; ready marker at {large.ready_seconds:.1f} vs {small.ready_seconds:.1f} s"
                + stall_note(small, large),
            )
        )
        figures.append(
            Figure(
                f"RSS at 10x history, {stage}",
                setting,
                "MB",
                large.rss_mb,
                small.rss_mb,
                baseline,
                Aim("<=", 1.3),
                f"after the fresh workload (peak {large.peak_rss_mb:.0f} vs "
                f"{small.peak_rss_mb:.0f} MB)",
            )
        )
    return figures


# ---- figures 4 and 5: other suites' figures -----------------------------------------------------

ISSUE_AIMS: dict[str, dict[str, Aim | None]] = {
    "window": {"window": Aim(">=", 0.5)},
    "projection": {"projection live": Aim(">=", 0.5), "replay": Aim(">=", 0.8)},
}
"""Per suite, the benchmarks of its figures that issue 22 names, with the issue's aims."""


def other_suite(context: BenchContext, name: str) -> SuiteResult:
    import importlib

    module = importlib.import_module(f"bench.suites.{name}")
    run: Callable[[BenchContext], SuiteResult] = module.run
    if name not in context.results:
        print(f"── scale: running the {name} suite for its figures …", file=sys.stderr, flush=True)
    return context.suite_result(name, run)


def search_measures_first(context: BenchContext) -> bool:
    """Whether the search suite's figures include the first search against the warm one."""
    import importlib

    if "search" in context.results:
        return any(SEARCH_FIRST_VS_WARM in f.benchmark for f in context.results["search"].figures)
    return hasattr(importlib.import_module("bench.suites.search"), SEARCH_MEASURES_FIRST)


def reported_figures(context: BenchContext, name: str) -> list[Figure]:
    return issue_figures(name, other_suite(context, name))


def issue_figures(name: str, result: SuiteResult) -> list[Figure]:
    """The figures of suite `name` that the issue names, with its aims, noted as theirs."""
    chosen = []
    for figure in result.figures:
        if name == "search":
            if SEARCH_FIRST_VS_WARM in figure.benchmark and figure.aim is not None:
                chosen.append(
                    dataclasses.replace(figure, note=f"{figure.note}; the search suite's")
                )
            continue
        aims = ISSUE_AIMS.get(name, {})
        if figure.benchmark in aims:
            note = f"{figure.note}; " if figure.note else ""
            chosen.append(
                dataclasses.replace(
                    figure, aim=aims[figure.benchmark], note=f"{note}the {name} suite's figure"
                )
            )
    return chosen


# ---- the suite ----------------------------------------------------------------------------------


def run(context: BenchContext) -> SuiteResult:
    profile = QUICK if context.quick else FULL
    history = int(context.options.get("scale_history") or profile.history)
    brokers = context.brokers if profile.every_broker else context.brokers[:1]
    raw: dict[str, Any] = {
        "profile": dataclasses.asdict(profile) | {"history": history},
        "brokers": list(brokers),
        "partitions": PARTITIONS,
        "max_in_flight_setting": MAX_IN_FLIGHT,
        "llm_seconds": LLM_SECONDS,
    }
    figures: list[Figure] = []
    errors: list[str] = []

    def part(name: str, measure: Callable[[], list[Figure]]) -> None:
        """One part of the suite: its figures, or its error (the other parts still run)."""
        try:
            figures.extend(measure())
        except Exception as error:
            traceback.print_exc()
            errors.append(f"{name}: {type(error).__name__}: {str(error)[:2000]}")

    for kind in brokers:

        def extraction(kind: BrokerKind = kind) -> list[Figure]:
            raw[f"extraction-{kind}"] = found = extraction_rounds(context, kind, profile.users)
            return extraction_figures(kind, found)

        def restarts(kind: BrokerKind = kind) -> list[Figure]:
            found = history_restarts(context, kind, history, profile.restarts)
            raw[f"history-{kind}"] = {
                "restarts": [r.to_json() for r in found.restarts],
                "stalls_while_building": found.stalls,
            }
            return history_figures(kind, found.restarts)

        part(f"extraction on {kind}", extraction)
        part(f"history on {kind}", restarts)
    for name in ("search", "window", "projection"):
        if name == "search" and not search_measures_first(context):
            raw["search"] = (
                "figure 4 not measured: bench/suites/search.py has no first-vs-warm search "
                f"figure yet (no {SEARCH_MEASURES_FIRST})"
            )
            continue
        part(f"the {name} suite", partial(reported_figures, context, name))
    return SuiteResult(figures, raw, errors)


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["scale", *sys.argv[1:]]))
