"""How often `build_context`'s past messages hold a LoCoMo question's evidence (no LLM, no
pipeline: `handlers.recall` on the conversation's turns, and the local embedder).

    python -m bench.locomo.recall_eval --data locomo10.zip --sessions 4 \
        --out bench/results/locomo-recall-YYYY-MM-DD.json

Every session's turns are past messages (speaker A and B by name, dated by their session, each
with the turn before it in its session as `before`, as `memstream.sdk.read_model` gives them
once a session is promoted, in one snapshot or several). For each scored question whose evidence
lies in the first `--sessions` sessions, the top `k` recalled messages are compared with its
evidence turns:

* `evidence`: the share of all questions' evidence turns that were recalled;
* `any_evidence`: the share of questions with at least one evidence turn recalled;
* `chars`: the mean characters the recalled lines take in a context (`handlers.context`).

Four rankings, so a change shows what each part adds:

* `keywords`: `recalled` over speaker and text alone, every query word kept (the ranking as
  built on 2026-12-05, before stop words and `before`);
* `stop_words`: the same with the query's stop words left out;
* `as_built`: `handlers.recall.recalled` (stop words left out, and `before` matched), what
  `build_context` does by default;
* `meaning`: the best `RERANK_POOL` of `as_built`'s matches reranked by meaning with the local
  embedder (`memstream.sdk.meaning.recalled_by_meaning`), what `build_context` does with
  `memory.rerank_past_messages` on.

conv-26 is left out by default (`--exclude`): it is the conversation the LoCoMo figures report,
so nothing is chosen on it. The JSON holds counts and shares only (LoCoMo's licence forbids
redistributing its text).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.locomo.dataset import Sample, evidence_ids, first_sessions, load
from bench.locomo.scoring import scored
from handlers.context import past_message_line
from handlers.ports import Embedder
from handlers.recall import STOP_WORDS, PastMessage, preceding, recalled
from memstream.providers.local_embedder import load_local_embedder
from memstream.sdk.meaning import VectorCache, recalled_by_meaning

Ranking = Callable[[str, Sequence[PastMessage], int], list[PastMessage]]


def keywords(query: str, messages: Sequence[PastMessage], limit: int) -> list[PastMessage]:
    """The ranking before stop words and `before`: every query word, the text alone."""
    return _without_before(query, messages, limit, frozenset())


def stop_words(query: str, messages: Sequence[PastMessage], limit: int) -> list[PastMessage]:
    """`recalled` without the message said before each one."""
    return _without_before(query, messages, limit, STOP_WORDS)


def _without_before(
    query: str, messages: Sequence[PastMessage], limit: int, leaving_out: frozenset[str]
) -> list[PastMessage]:
    """`recalled` on the messages without their `before` (the messages given are returned)."""
    plain = [replace(m, before="") for m in messages]
    given = {id(p): m for p, m in zip(plain, messages, strict=True)}
    recalled_plain = recalled(query, plain, limit, stop_words=leaving_out)
    return [given[id(p)] for p in recalled_plain]


def reranked_by_meaning(embedder: Embedder) -> Ranking:
    """The ranking with `memory.rerank_past_messages` on: the best `RERANK_POOL` keyword
    matches reranked by their similarity to the query through `embedder`."""
    cache = VectorCache(capacity=100_000)

    def ranking(query: str, messages: Sequence[PastMessage], limit: int) -> list[PastMessage]:
        return recalled_by_meaning(embedder, cache, query, messages, limit)

    return ranking


def rankings(embedder: Embedder) -> dict[str, Ranking]:
    """Each ranking measured, by name, each one adding a part to the one before."""
    return {
        "keywords": keywords,
        "stop_words": stop_words,
        "as_built": recalled,
        "meaning": reranked_by_meaning(embedder),
    }


@dataclass(frozen=True)
class Turned:
    """A past message and the dialogue id of its turn."""

    dia_id: str
    message: PastMessage


def past_messages(sample: Sample) -> list[Turned]:
    """Every turn of `sample` as a past message with the turn before it in its session."""
    found: list[Turned] = []
    for session in sample.sessions:
        turns = [turn for turn in session.turns if turn.content.strip()]
        before = preceding([[t.dia_id for t in turns]], {t.dia_id: t.content for t in turns})
        found.extend(
            Turned(
                t.dia_id,
                PastMessage(t.speaker, t.content, session.at.date(), before.get(t.dia_id, "")),
            )
            for t in turns
        )
    return found


def measured(sample: Sample, ranking: Ranking, limit: int) -> dict[str, float | int]:
    """The sample's evidence counts for one ranking and `limit`."""
    turned = past_messages(sample)
    ids = {id(t.message): t.dia_id for t in turned}
    messages = [t.message for t in turned]
    questions = [qa for qa in scored(sample.qa) if evidence_ids(qa)]
    found = held = any_held = chars = 0
    for qa in questions:
        wanted = evidence_ids(qa)
        shown = ranking(qa.question, messages, limit)
        got = wanted & {ids[id(m)] for m in shown}
        found, held = found + len(got), held + len(wanted)
        any_held += bool(got)
        chars += sum(len(past_message_line(m, "en")) + 1 for m in shown)
    return {
        "questions": len(questions),
        "evidence_turns": held,
        "evidence_recalled": found,
        "questions_with_evidence_recalled": any_held,
        "chars": chars,
    }


def summary(counts: Sequence[dict[str, float | int]]) -> dict[str, float | int]:
    total = {key: sum(c[key] for c in counts) for key in counts[0]}
    questions = max(1, int(total["questions"]))
    return {
        **total,
        "evidence": round(total["evidence_recalled"] / max(1, total["evidence_turns"]), 3),
        "any_evidence": round(total["questions_with_evidence_recalled"] / questions, 3),
        "mean_chars": round(total["chars"] / questions),
    }


def report(
    samples: Sequence[Sample], limits: Sequence[int], embedder: Embedder
) -> dict[str, dict[str, Any]]:
    """Per ranking and limit (``"as_built@6"``): the overall figures and each conversation's."""
    results: dict[str, dict[str, Any]] = {}
    for name, ranking in rankings(embedder).items():
        for limit in limits:
            per_sample = {s.sample_id: measured(s, ranking, limit) for s in samples}
            results[f"{name}@{limit}"] = {
                "overall": summary(list(per_sample.values())),
                "conversations": per_sample,
            }
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--exclude", default="conv-26", help="comma-separated conversation ids")
    parser.add_argument("--limits", default="4,6,8", help="messages recalled, comma-separated")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    excluded = {name for name in args.exclude.split(",") if name}
    samples = [
        first_sessions(s, args.sessions) for s in load(args.data) if s.sample_id not in excluded
    ]
    if not samples:
        parser.error(f"no conversation of {args.data} is left once {sorted(excluded)} are out")
    limits = [int(limit) for limit in args.limits.split(",")]
    measured_rankings = report(samples, limits, load_local_embedder())
    result = {
        "command": " ".join(["python -m bench.locomo.recall_eval", *(argv or sys.argv[1:])]),
        "sessions": args.sessions,
        "excluded": sorted(excluded),
        "conversations": [s.sample_id for s in samples],
        "rankings": measured_rankings,
    }
    for name, value in measured_rankings.items():
        overall = value["overall"]
        print(
            f"{name:>14}: evidence {overall['evidence']:.3f}, any {overall['any_evidence']:.3f}, "
            f"{overall['mean_chars']} chars, {overall['questions']} questions"
        )
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
