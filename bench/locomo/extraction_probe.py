"""How many of a LoCoMo conversation's answers the semantic extractor's memories hold, with each
session asked about whole or part by part (no pipeline: the extractor and the local model only).

    python -m bench.locomo.extraction_probe --data locomo10.zip --only conv-30 --sessions 4 \
        --turns-per-call 8 --out result.json

Each session is one snapshot (speaker A the user, speaker B a named person, as
`bench.locomo.pipeline` feeds them); with `--turns-per-call N` it is split into consecutive parts
of N turns, each asked about on its own, as `handlers.extraction.base.snapshot_parts` splits a
snapshot. Every memory's text is joined into one context, and `gold_in_memories` is the mean over
the scored questions of `bench.locomo.evaluate.gold_in_context` — the share of the gold answer's
stemmed tokens found there: extraction recall as the questions see it. The JSON written holds
counts only (LoCoMo's licence forbids redistributing its text); `--show` prints the memories.
Used to choose `limits.extraction_turns_per_call` on a development conversation (BENCHMARKS.md,
"LoCoMo"); conv-26, the reported one, is kept out of it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from bench.locomo.dataset import Sample, Session, first_sessions, load
from bench.locomo.evaluate import gold_in_context
from bench.locomo.pipeline import session_messages
from bench.locomo.scoring import scored
from events.snapshots import SnapshotPromoted, SnapshotTurn, snapshot_id
from handlers.extraction.base import extract
from handlers.extraction.registry import extractor_for
from handlers.messages import normalize_messages
from memstream.providers.clients import OpenAIChatModel
from memstream.runtime.local.llm import start_local_llm


def snapshots(sample: Sample, session: Session, turns_per_call: int) -> Iterator[SnapshotPromoted]:
    """The session as one snapshot, or as consecutive parts of `turns_per_call` turns (0: whole)."""
    messages = normalize_messages(session_messages(sample, session))
    turns = [
        SnapshotTurn(
            turn_id=f"{session.number}-{index}",
            role=m.role,
            name=m.name,
            tool_name=m.tool_name,
            content=m.content,
            occurred_at=session.at + timedelta(seconds=index),
        )
        for index, m in enumerate(messages)
    ]
    size = turns_per_call or len(turns)
    for seq, start in enumerate(range(0, len(turns), size)):
        part = turns[start : start + size]
        yield SnapshotPromoted(
            event_id=snapshot_id("u", f"s{session.number}", [t.turn_id for t in part]),
            occurred_at=part[-1].occurred_at,
            user_id="u",
            session_id=f"s{session.number}",
            seq=seq,
            reason="flush",
            turns=tuple(part),
        )


async def probe(sample: Sample, turns_per_call: int, show: bool) -> dict[str, object]:
    with start_local_llm() as server:
        llm = OpenAIChatModel(
            base_url=server.base_url, model=server.model, api_key="x", timeout=600
        )
        texts: list[str] = []
        calls = prompt_tokens = 0
        started = time.time()
        for session in sample.sessions:
            for snapshot in snapshots(sample, session, turns_per_call):
                outcome = await extract(extractor_for("semantic"), snapshot, llm)
                calls += outcome.attempts
                prompt_tokens += sum(answer.prompt_tokens for answer in outcome.answers)
                texts += [f"{m.subject}: {m.text}" for m in outcome.memories]
        context = "\n".join(texts)
        questions = scored(sample.qa)
        found = [gold_in_context(question, context) for question in questions]
        if show:
            print(context, file=sys.stderr)
        return {
            "conversation": sample.sample_id,
            "sessions": len(sample.sessions),
            "turns_per_call": turns_per_call or None,
            "model": server.model,
            "memories": len(texts),
            "calls": calls,
            "prompt_tokens": prompt_tokens,
            "seconds": round(time.time() - started),
            "questions": len(questions),
            "gold_in_memories": round(sum(found) / len(found), 3),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="locomo10.zip or .json")
    parser.add_argument("--only", required=True, help="one conversation, e.g. conv-30")
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--turns-per-call", type=int, default=0, help="0: each session whole")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--show", action="store_true", help="print the memories (stderr)")
    args = parser.parse_args(argv)
    (sample,) = [s for s in load(args.data) if s.sample_id == args.only]
    result = asyncio.run(
        probe(first_sessions(sample, args.sessions), args.turns_per_call, args.show)
    )
    text = json.dumps(result, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
