"""The extraction probe's snapshots: a session whole, or split into consecutive parts."""

from __future__ import annotations

from bench.locomo.dataset import SYNTHETIC, load
from bench.locomo.extraction_probe import snapshots
from bench.locomo.pipeline import session_messages


def test_a_session_is_one_snapshot_or_consecutive_parts_of_its_turns() -> None:
    sample = load(SYNTHETIC)[0]
    session = sample.sessions[0]
    said = [message["content"] for message in session_messages(sample, session)]
    (whole,) = snapshots(sample, session, 0)
    assert [turn.content for turn in whole.turns] == said
    parts = list(snapshots(sample, session, 2))
    assert [turn.content for part in parts for turn in part.turns] == said
    assert all(len(part.turns) <= 2 for part in parts) and len(parts) == (len(said) + 1) // 2
    assert [part.seq for part in parts] == list(range(len(parts)))
