"""Several LoCoMo runs read together: each conversation's F1 and prompt tokens against the whole
transcript's, and the same over all of them, from the reports alone (no data, no model).

    python -m bench.locomo.summary bench/results/locomo-conv26-s4-names-2026-12-06.json ... \\
        [--transcript bench/results/locomo-conv26-s4-2026-12-05.json ...] \\
        [--before bench/results/locomo-conv26-s4-narration-2026-12-06.json ...] \\
        [--way memstream] [--out summary.json]

A run made with `--no-full-context` has no transcript answers; they repeat exactly from run to
run (the same prompt, model and seed), so its transcript figures are read from another report
of the same conversation and sessions given with `--transcript`. `--before` names earlier runs
to count, per conversation, the answers that scored higher and lower since. Totals weigh every
question alike (a conversation of 35 questions counts 35 times one of 23), as the per-run
figures do. A conversation in several of the reports counts once, from the last report that
holds it. Public reports (`--public-out`) are enough: only scores are read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.locomo.evaluate import FULL_CONTEXT, MEMSTREAM, comparison, way_summary

Key = tuple[str, int]
"""A conversation and how many of its sessions were fed."""


def _samples(report: Mapping[str, Any]) -> dict[Key, dict[str, Any]]:
    return {(s["sample_id"], int(s["sessions"])): s for s in report["samples"]}


def _scores(sample: Mapping[str, Any], way: str) -> list[dict[str, Any]] | None:
    """The questions of `sample`, each its category and `way`'s answer (None when some question
    was not answered that way)."""
    questions = sample["questions"]
    if not questions or any(way not in q for q in questions):
        return None
    return [{"category": q["category"], way: q[way]} for q in questions]


def _overall(questions: Sequence[Mapping[str, Any]], way: str) -> dict[str, Any]:
    return dict(way_summary([dict(q) for q in questions], way)["overall"])


def conversation_summary(
    key: Key,
    ours: Sequence[Mapping[str, Any]],
    transcript: Sequence[Mapping[str, Any]] | None,
    before: Sequence[Mapping[str, Any]] | None,
    *,
    way: str = MEMSTREAM,
) -> dict[str, Any]:
    """One conversation: our F1 and tokens, the transcript's, their ratios (the runner's own
    `way_summary` and `comparison`, overall row), and how many answers scored higher or lower
    than `before` (question by question, in the run's order)."""
    figures = _overall(ours, way)
    row: dict[str, Any] = {
        "conversation": key[0],
        "sessions": key[1],
        "questions": len(ours),
        "f1": round(figures["f1"], 6),
        "prompt_tokens": round(figures["prompt_tokens_per_question"], 6),
        "gold_in_context": round(figures["gold_in_context"], 6),
    }
    if transcript is not None:
        if len(transcript) != len(ours):
            raise ValueError(f"{key[0]}: the transcript report scores other questions")
        both = [{**o, **t} for o, t in zip(ours, transcript, strict=True)]
        scores = {way: way_summary(both, way), FULL_CONTEXT: way_summary(both, FULL_CONTEXT)}
        (overall,) = [r for r in comparison(scores, way) if r["category"] == "overall"]
        row["transcript_f1"] = round(overall["full_context_f1"], 6)
        row["transcript_prompt_tokens"] = round(overall["full_context_prompt_tokens"], 6)
        row["f1_ratio"] = overall["f1_ratio"]
        row["prompt_tokens_ratio"] = overall["prompt_tokens_ratio"]
    if before is not None:
        if len(before) != len(ours):
            raise ValueError(f"{key[0]}: the earlier report scores other questions")
        pairs = list(zip(before, ours, strict=True))
        row["f1_before"] = round(_overall(before, way)["f1"], 6)
        row["higher"] = sum(1 for b, a in pairs if a[way]["f1"] > b[way]["f1"])
        row["lower"] = sum(1 for b, a in pairs if a[way]["f1"] < b[way]["f1"])
    return row


def summarize(
    reports: Sequence[Mapping[str, Any]],
    *,
    transcripts: Sequence[Mapping[str, Any]] = (),
    befores: Sequence[Mapping[str, Any]] = (),
    way: str = MEMSTREAM,
) -> dict[str, Any]:
    """Every conversation of `reports` and the totals over them (module doc). A conversation
    without transcript figures in its own report nor in `transcripts` has none, and the totals
    then leave it out of the transcript's side and the ratios."""
    transcript_scores: dict[Key, list[dict[str, Any]]] = {}
    for report in (*transcripts, *reports):
        for key, sample in _samples(report).items():
            scores = _scores(sample, FULL_CONTEXT)
            if scores is not None:
                transcript_scores[key] = scores
    before_scores = {
        key: scores
        for report in befores
        for key, sample in _samples(report).items()
        if (scores := _scores(sample, way)) is not None
    }
    latest = {key: sample for report in reports for key, sample in _samples(report).items()}
    rows, ours_all, transcript_all, ours_with_transcript = [], [], [], []
    for key, sample in latest.items():
        ours = _scores(sample, way)
        if ours is None:
            raise ValueError(f"{key[0]}: the report has no answers of {way!r}")
        transcript = transcript_scores.get(key)
        rows.append(conversation_summary(key, ours, transcript, before_scores.get(key), way=way))
        ours_all += ours
        if transcript is not None:
            transcript_all += transcript
            ours_with_transcript += ours
    total = conversation_summary(("all", 0), ours_all, None, None, way=way)
    total.pop("sessions")
    total["conversations"] = len(rows)
    if transcript_all:
        paired = conversation_summary(
            ("all", 0), ours_with_transcript, transcript_all, None, way=way
        )
        total["questions_with_transcript"] = paired["questions"]
        for field in ("transcript_f1", "transcript_prompt_tokens", "prompt_tokens_ratio"):
            total[field] = paired[field]
        total["f1_ratio"] = paired["f1_ratio"]
    return {"way": way, "conversations": rows, "total": total}


def _table(summary: Mapping[str, Any]) -> str:
    lines = [
        "| conversation (questions) | F1 | transcript F1 | ratio | prompt tokens (ratio) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in [*summary["conversations"], summary["total"]]:
        ratio = row.get("f1_ratio")
        tokens = f"{row['prompt_tokens']:.0f}"
        if row.get("prompt_tokens_ratio") is not None:
            tokens += f" ({row['prompt_tokens_ratio']:.2f}x)"
        lines.append(
            f"| {row['conversation']} ({row['questions']}) | {row['f1']:.3f} | "
            f"{row.get('transcript_f1', float('nan')):.3f} | "
            f"{'—' if ratio is None else f'{ratio:.2f}x'} | {tokens} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--transcript", nargs="*", type=Path, default=[])
    parser.add_argument("--before", nargs="*", type=Path, default=[])
    parser.add_argument("--way", default=MEMSTREAM)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    def read(paths: Sequence[Path]) -> list[dict[str, Any]]:
        return [json.loads(path.read_text()) for path in paths]

    summary = summarize(
        read(args.reports),
        transcripts=read(args.transcript),
        befores=read(args.before),
        way=args.way,
    )
    summary["command"] = " ".join(["python -m bench.locomo.summary", *(argv or sys.argv[1:])])
    print(_table(summary))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
