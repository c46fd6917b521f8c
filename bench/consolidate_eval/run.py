"""Consolidation on labelled clusters: does the LLM merge, supersede and keep as labelled?

    python bench/consolidate_eval/run.py --local large --out bench/consolidate_eval/results.json
    python bench/consolidate_eval/run.py --model M --base-url URL   # any OpenAI-compatible
    python bench/consolidate_eval/run.py --embed-only   # would the cases cluster? (no LLM)

Each case of `cases.json` is one cluster (memories of one subject, oldest first) and its label:
`merge`, `supersede` with the number of the memory true now, or `keep`. Every case is asked
exactly as the stage asks (`handlers.consolidation_prompt.ask`, `--attempts` calls at most),
and scored: right when the action is the label's (and, for a supersede, the survivor too).
"Facts lost" counts the answers that would retire a true fact: a merge or supersede of a `keep`
case, or a supersede that keeps the wrong memory. Calls and tokens are the endpoint's counts.

With `--embed-only` the local embedder says whether each case's memories would form one cluster
at the threshold (`--threshold`, default the ask threshold 0.89), without asking any LLM.

`--local small|large` starts the packaged llama.cpp server under the machine's model-server lock
(`bench.llama_timings.llama_lock`) and stops it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from events.memories import MemoryContent
from handlers import consolidation_prompt
from handlers.consolidation import Cluster, clusters_of
from handlers.known_memory import KnownMemory
from handlers.ports import ChatModel

CASES = Path(__file__).with_name("cases.json")


@dataclass(frozen=True)
class Case:
    id: str
    expected: str
    keep: int | None
    memories: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    id: str
    expected: str
    keep: int | None
    action: str
    survivor: int | None
    right: bool
    fact_lost: bool
    calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    reason: str


def load_cases(path: Path = CASES) -> list[Case]:
    document = json.loads(path.read_text(encoding="utf-8"))
    return [
        Case(c["id"], c["expected"], c.get("keep"), tuple(c["memories"])) for c in document["cases"]
    ]


def cluster_of(case: Case, vectors: Mapping[str, tuple[float, ...]] | None = None) -> Cluster:
    """The case as the stage would hold it: its memories in order (oldest first)."""
    members = tuple(
        KnownMemory(
            memory_id=f"{case.id}-{n}",
            version=1,
            user_id="bench",
            content=MemoryContent(subject="the user", owner="user", text=text),
            embedding=(vectors or {}).get(text, (1.0,)),
            embedding_model="bench",
            learned_at=datetime(2026, 1, 1, n, tzinfo=UTC),
        )
        for n, text in enumerate(case.memories)
    )
    return Cluster("the user", members)


def score(case: Case, action: str, survivor: int | None) -> tuple[bool, bool]:
    """(right, fact lost) for an answer (`survivor`: the kept memory's number, from 1)."""
    if case.expected == "keep":
        return action in ("keep", "unanswered"), action in ("merge", "supersede")
    if case.expected == "merge":  # a supersede retires a same-meaning memory: nothing lost
        return action == "merge", False
    right = action == "supersede" and survivor == case.keep
    wrong_survivor = action in ("merge", "supersede") and survivor != case.keep
    return right, action == "supersede" and wrong_survivor


async def evaluate(cases: Sequence[Case], llm: ChatModel, *, attempts: int) -> list[Outcome]:
    """Ask about every case, one after the other, as the stage does."""
    outcomes = []
    for case in cases:
        started = time.perf_counter()
        verdict, answers = await consolidation_prompt.ask(llm, cluster_of(case), calls=attempts)
        seconds = time.perf_counter() - started
        action = verdict.action if verdict else "unanswered"
        survivor = verdict.survivor + 1 if verdict and verdict.survivor is not None else None
        right, lost = score(case, action, survivor)
        outcomes.append(
            Outcome(
                id=case.id,
                expected=case.expected,
                keep=case.keep,
                action=action,
                survivor=survivor,
                right=right,
                fact_lost=lost,
                calls=len(answers),
                prompt_tokens=sum(a.prompt_tokens for a in answers),
                completion_tokens=sum(a.completion_tokens for a in answers),
                seconds=round(seconds, 2),
                reason=verdict.reason if verdict else "",
            )
        )
        mark = "ok " if right else "NO "
        print(f"{mark} {case.id:24} {case.expected:9} -> {action} {survivor or ''}", flush=True)
    return outcomes


def summary(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    by_label: dict[str, list[int]] = {}
    for outcome in outcomes:
        counted = by_label.setdefault(outcome.expected, [0, 0])
        counted[0] += outcome.right
        counted[1] += 1
    calls = sum(o.calls for o in outcomes) or 1
    return {
        "right": sum(o.right for o in outcomes),
        "cases": len(outcomes),
        "by_label": {label: f"{r}/{n}" for label, (r, n) in sorted(by_label.items())},
        "facts_lost": sum(o.fact_lost for o in outcomes),
        "unanswered": sum(o.action == "unanswered" for o in outcomes),
        "calls": sum(o.calls for o in outcomes),
        "prompt_tokens_per_call": round(sum(o.prompt_tokens for o in outcomes) / calls, 1),
        "completion_tokens_per_call": round(sum(o.completion_tokens for o in outcomes) / calls, 1),
        "seconds_per_case": round(sum(o.seconds for o in outcomes) / max(len(outcomes), 1), 2),
    }


def embed_only(cases: Sequence[Case], threshold: float) -> dict[str, Any]:
    """Whether each case's memories form one cluster with the local embedder at `threshold`."""
    from handlers.vectors import rounded
    from memstream.providers.local_embedder import load_local_embedder

    embedder = load_local_embedder()
    texts = sorted({text for case in cases for text in case.memories})
    vectors = {t: rounded(v) for t, v in zip(texts, embedder.embed(texts), strict=True)}
    clustered: dict[str, bool] = {}
    for case in cases:
        members = cluster_of(case, vectors).members
        found = clusters_of(members, user_id="bench", threshold=threshold)
        clustered[case.id] = any(len(c.members) == len(case.memories) for c in found)
    by_label: dict[str, list[int]] = {}
    for case in cases:
        counted = by_label.setdefault(case.expected, [0, 0])
        counted[0] += clustered[case.id]
        counted[1] += 1
    return {
        "embedding_model": embedder.model_name,
        "threshold": threshold,
        "clustered": {label: f"{c}/{n}" for label, (c, n) in sorted(by_label.items())},
        "cases": clustered,
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local", choices=("small", "large"), help="the packaged model")
    parser.add_argument("--model", help="the model name (an OpenAI-compatible endpoint)")
    parser.add_argument("--base-url", help="the endpoint (default: OPENAI_BASE_URL)")
    parser.add_argument("--api-key", help="default: OPENAI_API_KEY")
    parser.add_argument("--attempts", type=int, default=2, help="calls per case at most")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--embed-only", action="store_true", help="no LLM: would they cluster?")
    parser.add_argument("--threshold", type=float, default=0.89)
    parser.add_argument("--out", type=Path, help="write the results as JSON")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cases = load_cases()
    if args.embed_only:
        document: dict[str, Any] = embed_only(cases, args.threshold)
    else:
        outcomes, model = run_llm(args, cases)
        document = {
            "prompt_version": consolidation_prompt.PROMPT_VERSION,
            "model": model,
            "attempts": args.attempts,
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "summary": summary(outcomes),
            "outcomes": [asdict(o) for o in outcomes],
        }
        print(json.dumps(document["summary"], indent=2))
    if args.out:
        args.out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    elif args.embed_only:
        print(json.dumps(document, indent=2))
    return 0


def run_llm(args: argparse.Namespace, cases: Sequence[Case]) -> tuple[list[Outcome], str]:
    from memstream.providers.clients import OpenAIChatModel

    def run(base_url: str | None, model: str) -> list[Outcome]:
        llm = OpenAIChatModel(
            base_url=base_url,
            api_key=args.api_key or os.environ.get("OPENAI_API_KEY"),
            model=model,
            timeout=args.timeout,
            max_tokens=args.max_tokens,
        )
        return asyncio.run(evaluate(cases, llm, attempts=args.attempts))

    if args.local:
        from bench.llama_timings import llama_lock
        from memstream.runtime.local.llm import start_local_llm
        from memstream.runtime.local.weights import MODELS

        print("waiting for the model-server lock …", file=sys.stderr, flush=True)
        with llama_lock():
            server = start_local_llm(MODELS[args.local], startup_timeout=300.0)
            try:
                return run(server.base_url, server.model), server.model
            finally:
                server.stop()
    model = args.model or os.environ.get("MEMSTREAM_LLM_MODEL")
    if not model:
        raise SystemExit("give --model (or set MEMSTREAM_LLM_MODEL), or use --local small|large")
    return run(args.base_url or os.environ.get("OPENAI_BASE_URL"), model), model


if __name__ == "__main__":
    raise SystemExit(main())
