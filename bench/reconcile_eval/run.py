"""Labelled evaluation of reconciliation (ADD / UPDATE / REINFORCE) and of its thresholds.

    .venv/bin/python bench/reconcile_eval/run.py --embed-only               # thresholds only
    .venv/bin/python bench/reconcile_eval/run.py --local large              # packaged 1.5B model
    .venv/bin/python bench/reconcile_eval/run.py --base-url URL --model NAME [--api-key KEY]
        [--pairs FILE] [--pair ID ...] [--reinforce R --ask A] [--distractors 2]
        [--out report.json] [--timeout 900] [--no-warmup]

Every memory text of the labelled pairs (``pairs.json``, format in `bench.reconcile_eval.pairs`)
is embedded with the local embedder (`memstream.local.embedder`), rounded as the pipeline stores
vectors. Each pair's new memory is reconciled in a scope of the pair's existing memory plus up to
``--distractors`` same-subject memories of other pairs; its candidates are ranked by
`handlers.reconcile.options_for` (same subject, cosine).

Thresholds: zone counts at every (reinforce, ask) of a 0.005 grid from 0.80 to 1.00, and the
defaults the documented rule picks (`bench.reconcile_eval.scoring.choose_thresholds`), unless
``--reinforce``/``--ask`` are given. Then, unless ``--embed-only``, every pair goes through
`handlers.reconcile.reconcile` at those thresholds, with `handlers.reconcile_prompt.ask` as its
LLM port exactly as the extraction stage wires it (``attempts`` retries with the reason), and
the decision is scored. Tables go to stdout; ``--out`` writes JSON with every pair's
similarities, zone, LLM answers and verdict.

With ``--local small|large`` the script starts the packaged llama.cpp server itself
(`memstream.local.llm.start_local_llm`) and stops it afterwards; check first that no other model
server is running (two on 2 cores slow each other down far more than 2x).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.reconcile_eval.pairs import (
    DEFAULT_PAIRS_FILE,
    KINDS,
    LANGUAGES,
    Pair,
    parse_pairs,
    scope_for,
    texts,
)
from bench.reconcile_eval.scoring import (
    ACTIONS,
    Choice,
    Outcome,
    Ranked,
    Request,
    SelectionRule,
    ZoneCounts,
    choose_thresholds,
    confusion,
    counts,
    fraction,
    grid,
    groups,
    llm_usage,
    markdown_table,
    percent,
    reinforce_would_be_right,
    sweep,
    tally,
    zone,
)
from events.memories import Evidence, MemoryAdded, MemoryUpdated, Provenance
from handlers import reconcile_prompt
from handlers.extraction.results import rounded
from handlers.ports import ChatAnswer, ChatModel, LLMUnavailable
from handlers.reconcile import (
    Action,
    Answer,
    KnownMemory,
    NewMemory,
    Option,
    Source,
    Thresholds,
    cosine,
    options_for,
    reconcile,
)
from memstream.providers import OpenAIChatModel

GRID = grid(0.80, 1.00, 0.005)
RULE = SelectionRule()
CONFIG_DEFAULTS = (0.95, 0.86)
"""`memstream.config.ReconcileSettings` defaults when this benchmark was written."""
USER_ID = "eval-user"
CLOCK = datetime(2026, 1, 15, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Prepared:
    """A pair, its scope, its new memory (with vector) and its ranked candidates."""

    ranked: Ranked
    scope: tuple[KnownMemory, ...]
    new: NewMemory


@dataclass
class TimedChatModel:
    """Passes requests to `inner`, timing each and keeping its answer."""

    inner: ChatModel
    requests: list[Request] = field(default_factory=list)

    async def complete_json(self, messages: Sequence[dict[str, str]]) -> ChatAnswer:
        started = time.perf_counter()
        answer = await self.inner.complete_json(messages)
        self.requests.append(
            Request(
                seconds=time.perf_counter() - started,
                prompt_tokens=answer.prompt_tokens,
                completion_tokens=answer.completion_tokens,
                text=answer.text,
            )
        )
        return answer


def embed(pairs: Sequence[Pair]) -> tuple[str, int, dict[str, tuple[float, ...]]]:
    """(model name, dimension, text → vector) for every text of `pairs`, with the local
    embedder, each vector rounded as the extraction stage stores it."""
    from memstream.local.embedder import load_local_embedder

    embedder = load_local_embedder()
    items = texts(pairs)
    vectors = embedder.embed(items)
    return (
        embedder.model_name,
        embedder.dimension,
        {text: rounded(vector) for text, vector in zip(items, vectors, strict=True)},
    )


def prepare(
    pairs: Sequence[Pair],
    everyone: Sequence[Pair],
    vectors: Mapping[str, tuple[float, ...]],
    *,
    model: str,
    distractor_count: int,
) -> list[Prepared]:
    """Each pair's scope (distractors drawn from `everyone`) and ranked candidates."""
    prepared = []
    for pair in pairs:
        scope = scope_for(pair, everyone, vectors, model=model, distractor_count=distractor_count)
        new = NewMemory(pair.new, vectors[pair.new.text])
        options = options_for(pair.memory_type, new, scope, embedding_model=model)
        ranked = Ranked(
            pair=pair,
            candidates=tuple((o.memory.memory_id, o.similarity) for o in options),
            similarity=cosine(scope[0].embedding, new.embedding),
        )
        prepared.append(Prepared(ranked, tuple(scope), new))
    return prepared


async def decide(
    item: Prepared,
    thresholds: Thresholds,
    llm: ChatModel,
    *,
    attempts: int,
    provenance: Provenance,
) -> Outcome:
    """Reconcile the pair's new memory in its scope as the extraction stage does."""
    pair = item.ranked.pair
    timed = TimedChatModel(llm)
    shown: list[str] = []
    unusable = False

    async def ask(new: NewMemory, options: Sequence[Option]) -> Answer | None:
        nonlocal unusable
        shown.extend(option.memory.memory_id for option in options)
        answer, _ = await reconcile_prompt.ask(timed, new, options, attempts=attempts)
        unusable = answer is None
        return answer

    source = Source(
        source_id=f"eval-{pair.id}",
        user_id=USER_ID,
        agent_id=None,
        evidence=Evidence(source="sdk", observed_at=CLOCK),
        occurred_at=CLOCK,
    )
    expected_zone = zone(item.ranked, thresholds.reinforce, thresholds.ask)
    try:
        result = await reconcile(
            pair.memory_type,
            [item.new],
            item.scope,
            source=source,
            provenance=provenance,
            thresholds=thresholds,
            ask=ask,
        )
    except LLMUnavailable as exc:
        return Outcome(
            pair, expected_zone, None, None, "", tuple(shown), tuple(timed.requests),
            failure=f"LLM unavailable: {exc}",
        )  # fmt: skip
    (event,) = result.events
    action: Action = (
        "ADD"
        if isinstance(event, MemoryAdded)
        else "UPDATE"
        if isinstance(event, MemoryUpdated)
        else "REINFORCE"
    )
    decided_zone = "LLM" if result.asked else ("REINFORCE" if action == "REINFORCE" else "ADD")
    if decided_zone != expected_zone:
        raise AssertionError(f"{pair.id}: reconcile used zone {decided_zone}, not {expected_zone}")
    return Outcome(
        pair=pair,
        zone=decided_zone,
        action=action,
        target=None if action == "ADD" else event.memory_id,
        reason=result.notes[0],
        shown=tuple(shown),
        requests=tuple(timed.requests),
        unusable=unusable,
    )


async def evaluate(
    items: Sequence[Prepared],
    thresholds: Thresholds,
    llm: ChatModel,
    *,
    attempts: int,
    provenance: Provenance,
    warmup: bool,
) -> list[Outcome]:
    if warmup and any(
        zone(item.ranked, thresholds.reinforce, thresholds.ask) == "LLM" for item in items
    ):
        await llm.complete_json(
            [{"role": "user", "content": 'Answer with the JSON object {"ok": true}.'}]
        )
    outcomes = []
    for item in items:
        outcome = await decide(item, thresholds, llm, attempts=attempts, provenance=provenance)
        outcomes.append(outcome)
        _print_outcome(outcome, item.ranked)
    return outcomes


def _print_outcome(outcome: Outcome, ranked: Ranked) -> None:
    verdict = "ok" if outcome.right else "WRONG"
    seconds = sum(request.seconds for request in outcome.requests)
    best = f"{ranked.best:.3f}" if ranked.best is not None else "  -  "
    print(
        f"{outcome.pair.id:<28} best={best} {outcome.zone:<9} expected={outcome.pair.expected:<9} "
        f"decided={outcome.decided:<24} {verdict:<5} {seconds:5.1f} s",
        flush=True,
    )


# --- tables -------------------------------------------------------------------------------------


def similarity_table(rankeds: Sequence[Ranked]) -> str:
    """Min / median / max cosine of each pair's own two memories, by kind and language."""
    rows = []
    for kind in KINDS:
        for language in LANGUAGES:
            values = [
                r.similarity for r in rankeds if r.pair.kind == kind and r.pair.language == language
            ]
            if values:
                rows.append(
                    [
                        kind,
                        language,
                        str(len(values)),
                        f"{min(values):.3f}",
                        f"{statistics.median(values):.3f}",
                        f"{max(values):.3f}",
                    ]
                )
    return markdown_table(["kind", "language", "pairs", "min", "median", "max"], rows)


def reinforce_table(rankeds: Sequence[Ranked], values: Sequence[float]) -> str:
    """How many pairs a rule REINFORCE takes, and gets wrong, as `reinforce` falls."""
    rows = []
    for value in sorted(values, reverse=True):
        taken = [r for r in rankeds if r.best is not None and r.best >= value]
        wrong = [r for r in taken if not reinforce_would_be_right(r)]
        by_kind = ", ".join(
            f"{kind} {n}" for kind in KINDS if (n := sum(r.pair.kind == kind for r in wrong))
        )
        rows.append([f"{value:.3f}", str(len(taken)), str(len(wrong)), by_kind or "-"])
    return markdown_table(["reinforce", "REINFORCE zone", "wrong", "wrong, by kind"], rows)


def ask_table(
    rankeds: Sequence[Ranked], reinforce: float, values: Sequence[float], max_options: int
) -> str:
    """What the ADD zone swallows and what the LLM gets as `ask` falls (at `reinforce`)."""
    rows = []
    for value in sorted((v for v in values if v <= reinforce), reverse=True):
        c = counts(rankeds, reinforce, value, max_options)
        below = [r for r in rankeds if zone(r, reinforce, value) == "ADD"]
        rows.append(
            [
                f"{value:.3f}",
                str(c.added),
                str(sum(r.pair.expected == "UPDATE" for r in below)),
                str(sum(r.pair.expected == "REINFORCE" for r in below)),
                fraction(c.asked, c.pairs),
                percent(c.rule_accuracy),
                percent(c.best_case_accuracy),
            ]
        )
    return markdown_table(
        [
            "ask",
            "ADD zone",
            "swallowed UPDATE",
            "swallowed REINFORCE",
            "LLM zone",
            "rule zones right",
            "best case",
        ],
        rows,
    )


def zones_table(
    rankeds: Sequence[Ranked],
    thresholds: Thresholds,
    outcomes: Sequence[Outcome] | None,
) -> str:
    """Per group: the zones at `thresholds`, rule-zone accuracy and end-to-end accuracy."""
    by_id = {r.pair.id: r for r in rankeds}
    results = {o.pair.id: o for o in outcomes or ()}
    rows = []
    for label, ids in groups(r.pair for r in rankeds):
        c = counts(
            [by_id[i] for i in ids], thresholds.reinforce, thresholds.ask, thresholds.max_options
        )
        row = [
            label,
            str(c.pairs),
            f"{c.reinforced} ({c.reinforced_wrong})",
            str(c.asked),
            f"{c.added} ({c.added_wrong})",
            fraction(c.rule_right, c.rule_decided),
        ]
        if outcomes is not None:
            asked = [results[i] for i in ids if results[i].zone == "LLM"]
            row.append(fraction(sum(o.right for o in asked), len(asked)))
            row.append(fraction(sum(results[i].right for i in ids), len(ids)))
        rows.append(row)
    headers = [
        "group",
        "pairs",
        "REINFORCE zone (wrong)",
        "LLM zone",
        "ADD zone (wrong)",
        "rule zones right",
    ]
    if outcomes is not None:
        headers += ["LLM band right", "end to end right"]
    return markdown_table(headers, rows)


def compare_table(
    rankeds: Sequence[Ranked], settings: Sequence[tuple[str, float, float]], max_options: int
) -> str:
    rows = []
    for label, reinforce, ask in settings:
        c = counts(rankeds, reinforce, ask, max_options)
        rows.append(
            [
                label,
                f"{reinforce:.3f} / {ask:.3f}",
                f"{c.reinforced} ({c.reinforced_wrong})",
                fraction(c.asked, c.pairs),
                f"{c.added} ({c.added_wrong})",
                fraction(c.rule_right, c.rule_decided),
                percent(c.best_case_accuracy),
            ]
        )
    return markdown_table(
        [
            "thresholds",
            "reinforce / ask",
            "REINFORCE zone (wrong)",
            "LLM zone",
            "ADD zone (wrong)",
            "rule zones right",
            "best case",
        ],
        rows,
    )


def confusion_table(outcomes: Sequence[Outcome]) -> str:
    table = confusion(outcomes)
    columns = [*ACTIONS, *sorted({d for row in table.values() for d in row} - set(ACTIONS))]
    rows = [
        [f"{expected} expected", *(str(table[expected].get(column, 0)) for column in columns)]
        for expected in ACTIONS
    ]
    return markdown_table(["", *(f"decided {c}" for c in columns)], rows)


def usage_table(outcomes: Sequence[Outcome]) -> str:
    usage = llm_usage(outcomes)
    requests = usage.requests or 1
    seconds = usage.seconds
    return markdown_table(
        ["score", "value"],
        [
            ["pairs asked (LLM calls)", str(usage.asked)],
            ["requests (with retries)", str(usage.requests)],
            ["no usable answer (ADDed)", str(usage.unusable)],
            ["prompt tokens / request", f"{usage.prompt_tokens / requests:.0f}"],
            ["completion tokens / request", f"{usage.completion_tokens / requests:.1f}"],
            [
                "seconds / request: mean, median, max",
                f"{usage.mean_seconds or 0:.1f}, {usage.median_seconds or 0:.1f}, "
                f"{max(seconds, default=0):.1f}",
            ],
            ["seconds, all requests", f"{sum(seconds):.0f}"],
        ],
    )


def choice_text(choice: Choice, rule: SelectionRule, should: int) -> str:
    highest = (
        f"the highest wrong rule REINFORCE is {choice.highest_wrong_reinforce_pair} at "
        f"{choice.highest_wrong_reinforce:.3f}"
        if choice.highest_wrong_reinforce is not None
        else "no rule REINFORCE is wrong"
    )
    swallowed = ", ".join(choice.swallowed) or "none"
    return (
        f"reinforce = {choice.reinforce:.3f}: the smallest grid value more than {rule.margin} "
        f"above every wrong rule REINFORCE ({highest}).\n"
        f"ask = {choice.ask:.3f}: the largest grid value at which the ADD zone swallows at most "
        f"{percent(rule.max_swallowed)} ({choice.swallow_budget}) of the {should} pairs that "
        f"should UPDATE or REINFORCE; it swallows {len(choice.swallowed)}: {swallowed}."
    )


# --- JSON ---------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 0
    return {
        "cpus": cpus,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def _counts_json(c: ZoneCounts) -> dict[str, Any]:
    return {
        **asdict(c),
        "rule_accuracy": c.rule_accuracy,
        "llm_share": c.llm_share,
        "best_case_accuracy": c.best_case_accuracy,
    }


def report_json(
    *,
    command: Sequence[str],
    embedding: tuple[str, int],
    model: str | None,
    base_url: str | None,
    prepared: Sequence[Prepared],
    rule: SelectionRule,
    choice: Choice,
    thresholds: Thresholds,
    max_options: int,
    distractors: int,
    attempts: int,
    outcomes: Sequence[Outcome] | None,
) -> dict[str, Any]:
    rankeds = [item.ranked for item in prepared]
    by_id = {o.pair.id: o for o in outcomes or ()}
    points = sweep(rankeds, GRID, max_options)
    columns = list(asdict(points[0]))
    document: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(command),
        "machine": machine(),
        "embedding_model": {"name": embedding[0], "dimensions": embedding[1]},
        "llm_model": model,
        "base_url": base_url,
        "prompt_version": reconcile_prompt.PROMPT_VERSION,
        "distractors": distractors,
        "attempts": attempts,
        "selection_rule": asdict(rule),
        "choice": asdict(choice),
        "thresholds": asdict(thresholds),
        "at_thresholds": _counts_json(
            counts(rankeds, thresholds.reinforce, thresholds.ask, max_options)
        ),
        "at_config_defaults": _counts_json(counts(rankeds, *CONFIG_DEFAULTS, max_options)),
        "sweep": {"columns": columns, "rows": [list(asdict(p).values()) for p in points]},
        "pairs": [],
    }
    if outcomes is not None:
        usage = llm_usage(outcomes)
        document["end_to_end"] = {
            label: asdict(tally(by_id[i].right for i in ids))
            for label, ids in groups(o.pair for o in outcomes)
        }
        document["llm_band"] = {
            label: asdict(tally(by_id[i].right for i in ids if by_id[i].zone == "LLM"))
            for label, ids in groups(o.pair for o in outcomes)
        }
        document["confusion"] = confusion(outcomes)
        document["llm_usage"] = {
            **asdict(usage),
            "mean_seconds": usage.mean_seconds,
            "median_seconds": usage.median_seconds,
        }
    for item in prepared:
        ranked, pair = item.ranked, item.ranked.pair
        entry: dict[str, Any] = {
            "id": pair.id,
            "language": pair.language,
            "memory_type": pair.memory_type,
            "kind": pair.kind,
            "hard": pair.hard,
            "expected": pair.expected,
            "existing": pair.existing.text,
            "new": pair.new.text,
            "similarity": round(ranked.similarity, 6),
            "candidates": [
                {"memory_id": memory_id, "similarity": round(similarity, 6)}
                for memory_id, similarity in ranked.candidates
            ],
            "zone": zone(ranked, thresholds.reinforce, thresholds.ask),
        }
        outcome = by_id.get(pair.id)
        if outcome is not None:
            entry["decision"] = {
                "action": outcome.action,
                "target": outcome.target,
                "decided": outcome.decided,
                "right": outcome.right,
                "note": outcome.reason,
                "shown": list(outcome.shown),
                "unusable": outcome.unusable,
                "failure": outcome.failure,
                "requests": [asdict(request) for request in outcome.requests],
            }
        document["pairs"].append(entry)
    return document


# --- command line -------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--base-url", help="OpenAI-compatible base URL (default $OPENAI_BASE_URL)")
    parser.add_argument("--model", help="model name (default $MEMSTREAM_LLM_MODEL)")
    parser.add_argument("--api-key", help="API key (default $OPENAI_API_KEY)")
    parser.add_argument(
        "--local", choices=("small", "large"), help="start the packaged llama.cpp model"
    )
    parser.add_argument("--embed-only", action="store_true", help="thresholds only, no LLM")
    parser.add_argument(
        "--pairs", type=Path, default=DEFAULT_PAIRS_FILE, help="labelled pairs file"
    )
    parser.add_argument("--pair", action="append", default=[], help="only this pair id")
    parser.add_argument("--reinforce", type=float, help="use this threshold, not the chosen one")
    parser.add_argument("--ask", type=float, help="use this threshold, not the chosen one")
    parser.add_argument("--distractors", type=int, default=2, help="distractors per scope")
    parser.add_argument("--max-options", type=int, default=3, help="candidates the LLM sees")
    parser.add_argument("--attempts", type=int, default=3, help="LLM attempts per memory")
    parser.add_argument("--out", type=Path, help="write the JSON report here")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per LLM request")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up")
    args = parser.parse_args(argv)
    if args.local and (args.base_url or args.model):
        parser.error("--local starts its own server: do not also give --base-url/--model")
    if args.embed_only and (args.local or args.base_url or args.model):
        parser.error("--embed-only uses no LLM")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    everyone = parse_pairs(json.loads(args.pairs.read_text(encoding="utf-8")))
    pairs = everyone
    if args.pair:
        unknown = sorted(set(args.pair) - {pair.id for pair in everyone})
        if unknown:
            raise SystemExit(f"unknown pair ids: {', '.join(unknown)}")
        pairs = [pair for pair in everyone if pair.id in args.pair]
    model_name, dimension, vectors = embed(everyone)
    prepared = prepare(
        pairs, everyone, vectors, model=model_name, distractor_count=args.distractors
    )
    rankeds = [item.ranked for item in prepared]
    choice = choose_thresholds(rankeds, GRID, RULE)
    thresholds = Thresholds(
        reinforce=choice.reinforce if args.reinforce is None else args.reinforce,
        ask=choice.ask if args.ask is None else args.ask,
        max_options=args.max_options,
    )
    should = sum(r.pair.expected != "ADD" for r in rankeds)
    print(f"{len(pairs)} pairs, embedded with {model_name}\n")
    print("Similarity of each pair's two memories:\n")
    print(similarity_table(rankeds))
    print("\nRule REINFORCE as the threshold falls:\n")
    print(reinforce_table(rankeds, grid(0.90, 1.00, 0.005)))
    print(f"\nADD zone as ask falls (reinforce = {thresholds.reinforce:.3f}):\n")
    print(ask_table(rankeds, thresholds.reinforce, grid(0.80, 1.00, 0.01), args.max_options))
    print("\nChosen by the rule:\n")
    print(choice_text(choice, RULE, should))
    print("\nThe chosen thresholds against the configured defaults:\n")
    print(
        compare_table(
            rankeds,
            [
                ("chosen", choice.reinforce, choice.ask),
                ("config defaults", *CONFIG_DEFAULTS),
            ],
            args.max_options,
        )
    )
    outcomes: list[Outcome] | None = None
    model: str | None = None
    base_url: str | None = None
    if not args.embed_only:
        outcomes, model, base_url = run_llm(args, prepared, thresholds, (model_name, dimension))
    print(f"\nAt reinforce = {thresholds.reinforce:.3f}, ask = {thresholds.ask:.3f}:\n")
    print(zones_table(rankeds, thresholds, outcomes))
    if outcomes is not None:
        print("\nDecisions, end to end:\n")
        print(confusion_table(outcomes))
        print("\nLLM band:\n")
        print(usage_table(outcomes))
        _print_wrong(outcomes)
    if args.out:
        document = report_json(
            command=["bench/reconcile_eval/run.py", *(argv or sys.argv[1:])],
            embedding=(model_name, dimension),
            model=model,
            base_url=base_url,
            prepared=prepared,
            rule=RULE,
            choice=choice,
            thresholds=thresholds,
            max_options=args.max_options,
            distractors=args.distractors,
            attempts=args.attempts,
            outcomes=outcomes,
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )
        print(f"\nreport written to {args.out}")
    return 0


def run_llm(
    args: argparse.Namespace,
    prepared: Sequence[Prepared],
    thresholds: Thresholds,
    embedding: tuple[str, int],
) -> tuple[list[Outcome], str, str | None]:
    """Reconcile every pair against the configured or packaged LLM: (outcomes, model, url)."""
    if args.local:
        from memstream.local.llm import MODELS, start_local_llm

        print(f"\nstarting the local {args.local} model …", file=sys.stderr, flush=True)
        server = start_local_llm(MODELS[args.local], startup_timeout=300.0)
        try:
            return (
                _run(args, prepared, thresholds, embedding, server.base_url, server.model),
                server.model,
                server.base_url,
            )
        finally:
            server.stop()
    model = args.model or os.environ.get("MEMSTREAM_LLM_MODEL")
    if not model:
        raise SystemExit("give --model (or set MEMSTREAM_LLM_MODEL), or use --local small|large")
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL")
    return _run(args, prepared, thresholds, embedding, base_url, model), model, base_url


def _run(
    args: argparse.Namespace,
    prepared: Sequence[Prepared],
    thresholds: Thresholds,
    embedding: tuple[str, int],
    base_url: str | None,
    model: str,
) -> list[Outcome]:
    llm = OpenAIChatModel(
        base_url=base_url,
        api_key=args.api_key or os.environ.get("OPENAI_API_KEY"),
        model=model,
        timeout=args.timeout,
        max_tokens=args.max_tokens,
    )
    provenance = Provenance(
        llm_model=model, embedding_model=embedding[0], embedding_dimensions=embedding[1]
    )
    print(f"\nmodel {model} at {base_url or 'the default OpenAI endpoint'}\n", flush=True)
    return asyncio.run(
        evaluate(
            prepared,
            thresholds,
            llm,
            attempts=args.attempts,
            provenance=provenance,
            warmup=not args.no_warmup,
        )
    )


def _print_wrong(outcomes: Sequence[Outcome]) -> None:
    lines = []
    for outcome in outcomes:
        if outcome.right:
            continue
        pair = outcome.pair
        answer = outcome.requests[-1].text.strip() if outcome.requests else ""
        lines.append(
            f"{pair.id} ({outcome.zone}): expected {pair.expected}, decided {outcome.decided}"
            f" — {pair.existing.text} → {pair.new.text}"
            + (f"; shown {list(outcome.shown)}; answer {answer[:200]!r}" if answer else "")
            + (f"; {outcome.failure}" if outcome.failure else "")
        )
    if lines:
        print("\nwrong decisions:")
        print("\n".join(f"  {line}" for line in lines))


if __name__ == "__main__":
    raise SystemExit(main())
