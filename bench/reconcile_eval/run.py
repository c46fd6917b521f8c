"""Labelled evaluation of reconciliation (ADD / UPDATE / REINFORCE) and of its thresholds.

    .venv/bin/python bench/reconcile_eval/run.py --embed-only               # thresholds only
    .venv/bin/python bench/reconcile_eval/run.py --local large              # packaged 1.5B model
    .venv/bin/python bench/reconcile_eval/run.py --base-url URL --model NAME [--api-key KEY]
        [--pairs FILE] [--pair ID ...] [--reinforce R --ask A] [--distractors 2]
        [--system-prompt FILE] [--out report.json] [--timeout 900] [--no-warmup]
        [--batch N [--batch-format shared|inline] [--batch-system-prompt FILE]]

Every memory text of the labelled pairs (``pairs.json``, format in `bench.reconcile_eval.pairs`)
is embedded with the local embedder (`memstream.providers.local_embedder`), rounded as the pipeline
stores
vectors. Each pair's new memory is reconciled in a scope of the pair's existing memory plus up to
``--distractors`` same-subject memories of other pairs; its candidates are ranked by
`handlers.reconcile.options_for` (same subject, cosine).

Thresholds: zone counts at every (reinforce, ask) of a 0.005 grid from 0.80 to 1.00, and the
defaults the documented rule picks (`bench.reconcile_eval.scoring.choose_thresholds`), unless
``--reinforce``/``--ask`` are given. Then, unless ``--embed-only``, every pair goes through
`handlers.reconcile.reconcile` at those thresholds, with `handlers.reconcile_prompt.ask` as its
LLM port exactly as the extraction stage wires it (``attempts`` retries with the reason), and
the decision is scored. Tables go to stdout; ``--out`` writes JSON with every pair's
similarities, zone, LLM answers and verdict. ``--system-prompt FILE`` replaces
`handlers.reconcile_prompt.SYSTEM_PROMPT` for this run only, to measure a candidate prompt
before proposing it (the user turn and the strict parser stay the handler's). ``--batch N``
asks the band N questions per call: with the handler's batched prompt (``--batch-format
shared``, `handlers.reconcile_prompt.Batch`), or with the candidate of
`bench.reconcile_eval.inline_batch` (``inline``: each question's candidates listed under it),
whose system prompt ``--batch-system-prompt FILE`` replaces. ``--report FILE`` prints the
tables of a saved JSON report again, without any model.

With ``--local small|large`` the script starts the packaged llama.cpp server itself
(`memstream.runtime.local.llm.start_local_llm`) and stops it afterwards, holding the machine's
model-server lock (`bench.llama_timings.llama_lock`, ``/tmp/memstream-llama.lock``) meanwhile:
it waits for another holder to finish (two servers on 2 cores slow each other down far more than
2x).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.llama_timings import llama_lock
from bench.machine import machine as base_machine
from bench.reconcile_eval import inline_batch
from bench.reconcile_eval.pairs import (
    DEFAULT_PAIRS_FILE,
    Pair,
    parse_pairs,
    scope_for,
    texts,
)
from bench.reconcile_eval.scoring import (
    HARMS,
    Choice,
    Outcome,
    Ranked,
    Request,
    SelectionRule,
    ZoneCounts,
    choose_thresholds,
    confusion,
    counts,
    groups,
    harm,
    llm_usage,
    sweep,
    tally,
    zone,
)
from bench.reconcile_eval.tables import GRID, report, variants_table
from events.memories import Evidence, MemoryAdded, MemoryUpdated, Provenance
from handlers import reconcile_prompt
from handlers.known_memory import KnownMemory
from handlers.ports import ChatAnswer, ChatModel, LLMUnavailable
from handlers.reconcile import (
    Action,
    Answer,
    NewMemory,
    Option,
    Question,
    Source,
    Thresholds,
    options_for,
    reconcile,
)
from handlers.rendering import has_chinese
from handlers.vectors import cosine, rounded
from memstream.config import ReconcileSettings
from memstream.providers.clients import OpenAIChatModel

RULE = SelectionRule()
CONFIG_DEFAULTS = (ReconcileSettings().reinforce_threshold, ReconcileSettings().ask_threshold)
"""The thresholds `memstream.config.ReconcileSettings` ships with; a report records them."""
PLACEHOLDER_DEFAULTS = (0.95, 0.86)
"""The shipped thresholds before this benchmark chose them: what a report that records none was
compared with."""
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
    from memstream.providers.local_embedder import load_local_embedder

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
    answered: tuple[Answer | None, Sequence[Request]] | None = None,
) -> Outcome:
    """Reconcile the pair's new memory in its scope as the extraction stage does: its question
    asked alone, or (`answered`) the answer it got in a batch and the batch's requests."""
    pair = item.ranked.pair
    timed = TimedChatModel(llm)
    shown: list[str] = []
    unusable = False

    async def ask(questions: Sequence[Question]) -> list[Answer | None]:
        nonlocal unusable
        (question,) = questions
        shown.extend(option.memory.memory_id for option in question.options)
        if answered is not None:
            answer, requests = answered
            timed.requests.extend(requests)
        else:
            answer, _ = await reconcile_prompt.ask(
                timed, question.new, question.options, attempts=attempts
            )
        unusable = answer is None
        return [answer]

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
    batch: int = 1,
    batch_prompt: str | None = None,
) -> list[Outcome]:
    """Every pair's outcome; with `batch` > 1 the LLM-band pairs are asked `batch` at a time in
    one call each (`batches`), as the extraction stage asks a snapshot's ambiguous memories;
    `batch_prompt` (a system prompt) asks them with the inline candidate format instead
    (`bench.reconcile_eval.inline_batch`)."""
    if warmup and any(
        zone(item.ranked, thresholds.reinforce, thresholds.ask) == "LLM" for item in items
    ):
        await llm.complete_json(
            [{"role": "user", "content": 'Answer with the JSON object {"ok": true}.'}]
        )
    answered: dict[str, tuple[Answer | None, Sequence[Request]]] = {}
    if batch > 1:
        band = [i for i in items if zone(i.ranked, thresholds.reinforce, thresholds.ask) == "LLM"]
        for chunk in batches(band, batch):
            answered |= await ask_batch(
                chunk, thresholds, llm, attempts=attempts, inline_prompt=batch_prompt
            )
    outcomes = []
    for item in items:
        outcome = await decide(
            item,
            thresholds,
            llm,
            attempts=attempts,
            provenance=provenance,
            answered=answered.get(item.ranked.pair.id),
        )
        outcomes.append(outcome)
        _print_outcome(outcome, item.ranked)
    return outcomes


def batches(items: Sequence[Prepared], size: int) -> list[list[Prepared]]:
    """The pairs in groups of `size` of one language each (a snapshot is in one language), in an
    order that mixes the kinds (sorted by a hash of the pair id, so the grouping is the same on
    every run and does not follow the file's order of kinds)."""
    groups: list[list[Prepared]] = []
    for language in sorted({item.ranked.pair.language for item in items}):
        same = [item for item in items if item.ranked.pair.language == language]
        same.sort(key=lambda item: hashlib.sha256(item.ranked.pair.id.encode()).hexdigest())
        groups.extend(same[start : start + size] for start in range(0, len(same), size))
    return groups


async def ask_batch(
    chunk: Sequence[Prepared],
    thresholds: Thresholds,
    llm: ChatModel,
    *,
    attempts: int,
    inline_prompt: str | None = None,
) -> dict[str, tuple[Answer | None, Sequence[Request]]]:
    """Ask the questions of `chunk` in one call (`handlers.reconcile_prompt.ask_all`, or
    `inline_batch.ask_inline` with the system prompt `inline_prompt`): each pair's answer, the
    first pair carrying the call's requests (so usage counts them once)."""
    questions = [Question(item.new, tuple(await band_of(item, thresholds))) for item in chunk]
    timed = TimedChatModel(llm)
    if inline_prompt is not None:
        decided, _ = await inline_batch.ask_inline(
            timed, questions, attempts=attempts, system_prompt=inline_prompt
        )
    else:
        decided, _ = await reconcile_prompt.ask_all(
            timed, questions, attempts=attempts, per_call=len(questions)
        )
    return {
        item.ranked.pair.id: (answer, timed.requests if n == 0 else ())
        for n, (item, answer) in enumerate(zip(chunk, decided, strict=True))
    }


async def band_of(item: Prepared, thresholds: Thresholds) -> list[Option]:
    """The candidates the pair's question shows: what `reconcile` itself asks about."""
    shown: list[Option] = []

    async def capture(questions: Sequence[Question]) -> list[Answer | None]:
        shown.extend(questions[0].options)
        return [None]

    source = Source(
        source_id="band", user_id=USER_ID, agent_id=None,
        evidence=Evidence(source="sdk", observed_at=CLOCK), occurred_at=CLOCK,
    )  # fmt: skip
    provenance = Provenance(
        llm_model="-", embedding_model=item.scope[0].embedding_model, embedding_dimensions=1
    )
    await reconcile(
        item.ranked.pair.memory_type, [item.new], item.scope, source=source,
        provenance=provenance, thresholds=thresholds, ask=capture,
    )  # fmt: skip
    return shown


def _print_outcome(outcome: Outcome, ranked: Ranked) -> None:
    verdict = "ok" if outcome.right else "WRONG"
    seconds = sum(request.seconds for request in outcome.requests)
    best = f"{ranked.best:.3f}" if ranked.best is not None else "  -  "
    print(
        f"{outcome.pair.id:<28} best={best} {outcome.zone:<9} expected={outcome.pair.expected:<9} "
        f"decided={outcome.decided:<24} {verdict:<5} {seconds:5.1f} s",
        flush=True,
    )


# --- JSON ---------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    return base_machine() | {"load_average": load}


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
    system_prompt: Path | None,
    outcomes: Sequence[Outcome] | None,
    batch: int = 1,
    batch_prompt: tuple[str, str] | None = None,
    english_system_prompt: Path | None = None,
) -> dict[str, Any]:
    """The JSON report; `batch_prompt` is the (version, system prompt) of a candidate batched
    prompt the run used instead of the handler's."""
    if batch > 1 and batch_prompt is None:
        batch_prompt = (reconcile_prompt.BATCH_PROMPT_VERSION, reconcile_prompt.BATCH_SYSTEM_PROMPT)
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
        "system_prompt_file": str(system_prompt) if system_prompt else None,
        "system_prompt": reconcile_prompt.SYSTEM_PROMPT,
        "english_system_prompt_file": str(english_system_prompt) if english_system_prompt else None,
        "english_system_prompt": (
            english_system_prompt.read_text(encoding="utf-8") if english_system_prompt else None
        ),
        "distractors": distractors,
        "attempts": attempts,
        "batch": batch,
        "batch_prompt_version": batch_prompt[0] if batch > 1 and batch_prompt else None,
        "batch_system_prompt": batch_prompt[1] if batch > 1 and batch_prompt else None,
        "selection_rule": asdict(rule),
        "choice": asdict(choice),
        "thresholds": asdict(thresholds),
        "at_thresholds": _counts_json(
            counts(rankeds, thresholds.reinforce, thresholds.ask, max_options)
        ),
        "config_defaults": list(CONFIG_DEFAULTS),
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
        document["harm"] = {kind: sum(harm(o) == kind for o in outcomes) for kind in HARMS}
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
                "harm": harm(outcome),
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
    parser.add_argument(
        "--batch",
        type=int,
        default=1,
        help="ask the LLM-band pairs this many at a time in one call (2-8), as a snapshot's",
    )
    parser.add_argument(
        "--batch-format",
        choices=("shared", "inline"),
        default="shared",
        help="shared: the handler's batched prompt; inline: bench/reconcile_eval/inline_batch.py",
    )
    parser.add_argument(
        "--batch-system-prompt",
        type=Path,
        help="with --batch-format inline: this system prompt instead of prompt-batch-inline-1.txt",
    )
    parser.add_argument("--out", type=Path, help="write the JSON report here")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per LLM request")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up")
    parser.add_argument(
        "--system-prompt", type=Path, help="use this system prompt instead of the handler's"
    )
    parser.add_argument(
        "--english-system-prompt",
        type=Path,
        help="the system prompt of a question none of whose memories has a Chinese character "
        "(the others keep the handler's, or --system-prompt's)",
    )
    parser.add_argument(
        "--report", type=Path, help="print the tables of a saved JSON report again, and stop"
    )
    parser.add_argument(
        "--compare",
        type=Path,
        nargs="+",
        help="print one table comparing saved JSON reports (accuracy, facts lost, cost), and stop",
    )
    args = parser.parse_args(argv)
    if args.local and (args.base_url or args.model):
        parser.error("--local starts its own server: do not also give --base-url/--model")
    if args.embed_only and (args.local or args.base_url or args.model):
        parser.error("--embed-only uses no LLM")
    if not 1 <= args.batch <= len(reconcile_prompt.LETTERS):
        parser.error(f"--batch must be between 1 and {len(reconcile_prompt.LETTERS)}")
    if args.batch_system_prompt and args.batch_format != "inline":
        parser.error("--batch-system-prompt is for --batch-format inline")
    if args.batch_format == "inline" and args.batch < 2:
        parser.error("--batch-format inline needs --batch 2 or more")
    args.inline_prompt = inline_prompt(args)  # read now, not once the model-server lock is held
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    everyone = parse_pairs(json.loads(args.pairs.read_text(encoding="utf-8")))
    if args.report:
        return print_saved(args.report, everyone)
    if args.compare:
        return print_compared(args.compare, everyone)
    pairs = everyone
    if args.pair:
        unknown = sorted(set(args.pair) - {pair.id for pair in everyone})
        if unknown:
            raise SystemExit(f"unknown pair ids: {', '.join(unknown)}")
        pairs = [pair for pair in everyone if pair.id in args.pair]
    if args.system_prompt:
        reconcile_prompt.SYSTEM_PROMPT = args.system_prompt.read_text(encoding="utf-8")
    if args.english_system_prompt:
        ask_english_with(args.english_system_prompt.read_text(encoding="utf-8"))
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
    outcomes: list[Outcome] | None = None
    model: str | None = None
    base_url: str | None = None
    if not args.embed_only:
        outcomes, model, base_url = run_llm(args, prepared, thresholds, (model_name, dimension))
    print()
    print(
        report(
            rankeds,
            embedding_model=model_name,
            rule=RULE,
            choice=choice,
            thresholds=thresholds,
            config_defaults=CONFIG_DEFAULTS,
            outcomes=outcomes,
        )
    )
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
            system_prompt=args.system_prompt,
            outcomes=outcomes,
            batch=args.batch,
            batch_prompt=args.inline_prompt,
            english_system_prompt=args.english_system_prompt,
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
        )
        print(f"\nreport written to {args.out}")
    return 0


def inline_prompt(args: argparse.Namespace) -> tuple[str, str] | None:
    """(version, system prompt) of the inline batched candidate, when the run uses it."""
    if args.batch_format != "inline":
        return None
    path = args.batch_system_prompt or inline_batch.DEFAULT_PROMPT_FILE
    version = inline_batch.VERSION if args.batch_system_prompt is None else path.stem
    return version, path.read_text(encoding="utf-8")


def print_saved(path: Path, everyone: Sequence[Pair]) -> int:
    """Print the tables of a saved JSON report again (no model needed)."""
    document = json.loads(path.read_text(encoding="utf-8"))
    rankeds, outcomes = saved_run(document, everyone)
    rule = SelectionRule(**document["selection_rule"])
    choice_fields = {**document["choice"], "swallowed": tuple(document["choice"]["swallowed"])}
    print(
        report(
            rankeds,
            embedding_model=document["embedding_model"]["name"],
            rule=rule,
            choice=Choice(**choice_fields),
            thresholds=Thresholds(**document["thresholds"]),
            config_defaults=tuple(document.get("config_defaults", PLACEHOLDER_DEFAULTS)),
            outcomes=outcomes,
        )
    )
    return 0


def print_compared(paths: Sequence[Path], everyone: Sequence[Pair]) -> int:
    """Print one row per saved JSON report: what it decided and what its band cost."""
    runs = []
    for path in paths:
        document = json.loads(path.read_text(encoding="utf-8"))
        _, outcomes = saved_run(document, everyone)
        runs.append((path.name, prompt_name(document), document.get("batch", 1), outcomes or []))
    print(variants_table(runs))
    return 0


def prompt_name(document: Mapping[str, Any]) -> str:
    """The prompt a saved report's band was asked with."""
    if document.get("batch", 1) > 1:
        return str(document.get("batch_prompt_version"))
    name = (
        Path(document["system_prompt_file"]).name
        if document.get("system_prompt_file")
        else str(document["prompt_version"])
    )
    if document.get("english_system_prompt_file"):
        name += f", {Path(document['english_system_prompt_file']).name} in English"
    return name


def ask_english_with(english: str) -> None:
    """From now on, a question none of whose memories has a Chinese character is asked with
    the system prompt `english` (`handlers.reconcile_prompt.prompt` wrapped for this run)."""
    handler_prompt = reconcile_prompt.prompt

    def prompt(new: NewMemory, options: Sequence[Option]) -> list[dict[str, str]]:
        messages = handler_prompt(new, options)
        texts = [new.content.text, *(option.memory.content.text for option in options)]
        if not any(map(has_chinese, texts)):
            messages[0] = {"role": "system", "content": english}
        return messages

    reconcile_prompt.prompt = prompt


def saved_run(
    document: Mapping[str, Any], everyone: Sequence[Pair]
) -> tuple[list[Ranked], list[Outcome] | None]:
    """The rankings and outcomes of a saved JSON report (its pairs looked up in `everyone`)."""
    by_id = {pair.id: pair for pair in everyone}
    rankeds: list[Ranked] = []
    outcomes: list[Outcome] = []
    for entry in document["pairs"]:
        pair = by_id[entry["id"]]
        rankeds.append(
            Ranked(
                pair=pair,
                candidates=tuple((c["memory_id"], c["similarity"]) for c in entry["candidates"]),
                similarity=entry["similarity"],
            )
        )
        decision = entry.get("decision")
        if decision is not None:
            outcomes.append(
                Outcome(
                    pair=pair,
                    zone=entry["zone"],
                    action=decision["action"],
                    target=decision["target"],
                    reason=decision["note"],
                    shown=tuple(decision["shown"]),
                    requests=tuple(Request(**request) for request in decision["requests"]),
                    unusable=decision["unusable"],
                    failure=decision["failure"],
                )
            )
    return rankeds, outcomes if outcomes else None


def run_llm(
    args: argparse.Namespace,
    prepared: Sequence[Prepared],
    thresholds: Thresholds,
    embedding: tuple[str, int],
) -> tuple[list[Outcome], str, str | None]:
    """Reconcile every pair against the configured or packaged LLM: (outcomes, model, url)."""
    if args.local:
        from memstream.runtime.local.llm import start_local_llm
        from memstream.runtime.local.weights import MODELS

        print("\nwaiting for the model-server lock …", file=sys.stderr, flush=True)
        with llama_lock():
            print(f"starting the local {args.local} model …", file=sys.stderr, flush=True)
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
            batch=args.batch,
            batch_prompt=None if args.inline_prompt is None else args.inline_prompt[1],
        )
    )


if __name__ == "__main__":
    raise SystemExit(main())
