"""The full-context baseline's context: the whole conversation, every session under its date.

The same model answers the same questions with the same prompt from this text instead of
memstream's memories, so a run's two sets of figures differ only by what the answerer was shown
(BENCHMARKS.md, "LoCoMo").
"""

from __future__ import annotations

from bench.locomo.dataset import Sample, Session
from handlers.extraction.dates import english_day


def session_heading(session: Session) -> str:
    """``[8 May 2023] Conversation 1 (1:56 pm)``: the date in the memories' bracket format."""
    at = session.at
    hour = at.hour % 12 or 12
    half = "am" if at.hour < 12 else "pm"
    return f"[{english_day(at.date())}] Conversation {session.number} ({hour}:{at:%M} {half})"


def full_transcript(sample: Sample) -> str:
    """Every session of `sample`, in order: its heading, then ``Speaker: what was said`` lines
    (a shared photo as its caption, as the papers' baselines show it)."""
    blocks = []
    for session in sample.sessions:
        lines = [session_heading(session)]
        lines += [f"{turn.speaker}: {turn.content}" for turn in session.turns if turn.content]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
