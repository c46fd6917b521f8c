"""Which memories of earlier LoCoMo runs `handlers.extraction.borrowed_words` would judge another
speaker's (and which `handlers.extraction.names.names_the_user_as_another` would drop), without
a model: the memories a run kept, read again against their conversation.

    python -m bench.locomo.borrowed_probe --data locomo10.zip REPORT.json ... \
        [--exclude conv-26] [--show] [--out counts.json]

The reports must be the runner's full ones (`--out`, not `--public-out`): only they hold the
memories' texts. A memory's source snapshot is not in the report, so each memory is judged
against the session of its conversation holding the one message most like it (the share of its
content terms, as the rule counts them), each session one snapshot as `extraction_probe` makes
them; a memory written twice by two runs counts once. The rule judges facts only: a report
that lists its memories' types (`memory_types`, since 2026-12-07) has its episodes left out;
an older one's memories are all read as facts, so what it finds is an upper bound. The JSON
written holds counts only (LoCoMo's licence forbids redistributing its text); `--show` prints
each memory judged, with its owner and what it becomes. Whether a judgement is right is read
by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.locomo.dataset import Sample, first_sessions, load
from bench.locomo.extraction_probe import snapshots
from handlers.attribution import canonical_subject, subject_in_statement
from handlers.extraction.borrowed_words import Borrowed, borrowed_from
from handlers.extraction.drafts import support
from handlers.extraction.names import names_the_user_as_another
from handlers.extraction.transcript import Transcript, transcript_of


def _source(memory: str, transcripts: Sequence[Transcript]) -> Transcript:
    """The session holding the one message most like `memory`."""

    def closest(transcript: Transcript) -> float:
        names = transcript.names
        return max(
            (support(memory, [m.content], names=names) or 0.0 for m in transcript.messages),
            default=0.0,
        )

    return max(transcripts, key=closest)


def judged(memory: str, transcripts: Sequence[Transcript]) -> Borrowed | None:
    """What the rule makes of `memory` in the session it most likely came from."""
    transcript = _source(memory, transcripts)
    user_name, speakers = transcript.user_name, transcript.speaker_names
    opening = subject_in_statement(memory, user_name=user_name, speaker_names=speakers)
    if opening is None:
        return None
    subject = canonical_subject(opening, user_name=user_name, speaker_names=speakers)
    return borrowed_from(memory, subject, transcript)


_COUNTS = ("memories", "moved", "dropped", "names_the_user_as_another")
"""What is counted per conversation: the memories read, those the borrowed-words rule moves or
drops, and those `names_the_user_as_another` drops (speaker A is the user)."""


def probe(
    reports: Sequence[dict[str, Any]], samples: dict[str, Sample], exclude: set[str], show: bool
) -> dict[str, Any]:
    seen: set[tuple[str, str]] = set()
    counts: dict[str, dict[str, int]] = {}
    for report in reports:
        for result in report["samples"]:
            conversation = result["sample_id"]
            if conversation in exclude:
                continue
            sample = first_sessions(samples[conversation], int(result["sessions"]))
            transcripts = [
                transcript_of(snapshot)
                for session in sample.sessions
                for snapshot in snapshots(sample, session, 0)
            ]
            row = counts.setdefault(conversation, dict.fromkeys(_COUNTS, 0))
            types = result.get("memory_types") or ["semantic"] * len(result["memory_texts"])
            for memory, memory_type in zip(result["memory_texts"], types, strict=True):
                if memory_type != "semantic" or (conversation, memory) in seen:
                    continue
                seen.add((conversation, memory))
                row["memories"] += 1
                if names_the_user_as_another(memory, sample.speaker_a):
                    row["names_the_user_as_another"] += 1
                    if show:
                        print(f"{conversation} | {memory}\n    -> names the user again (dropped)")
                borrowed = judged(memory, transcripts)
                if borrowed is None:
                    continue
                row["moved" if borrowed.moved else "dropped"] += 1
                if show:
                    print(
                        f"{conversation} | {memory}\n    -> {borrowed.owner.subject}: "
                        f"{borrowed.moved or '(dropped)'}"
                    )
    total = {key: sum(row[key] for row in counts.values()) for key in _COUNTS}
    return {"conversations": counts, "total": total}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--exclude", default="conv-26", help="comma-separated conversation ids")
    parser.add_argument("--show", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    samples = {sample.sample_id: sample for sample in load(args.data)}
    reports = [json.loads(path.read_text()) for path in args.reports]
    exclude = {c for c in args.exclude.split(",") if c}
    result = probe(reports, samples, exclude, args.show)
    result["command"] = " ".join(
        ["python -m bench.locomo.borrowed_probe", *(argv if argv is not None else sys.argv[1:])]
    )
    print(json.dumps(result["total"]))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
