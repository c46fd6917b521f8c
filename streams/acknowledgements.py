"""Applied offsets acknowledged to Faust's consumer, so the group's commit moves past them.

Faust commits a partition only up to its first unacknowledged offset, and the stream
acknowledges only the records it delivered. A record the partition guard read back from the log,
or one applied before a restart whose redelivery Faust dropped, is never acknowledged by the
stream and would hold the group's commit below it for good (docs/architecture.md, "Stages").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from faust.types import TP, Message

ACKS_PER_CHECK = 10_000
"""At most this many applied offsets of a partition are acknowledged to Faust per check
(`applied_beyond_commits`): a commit far behind catches up in steps."""


def applied_beyond_commits(
    committed: Mapping[TP, int | None],
    last_applied: Callable[[TP], int | None],
    *,
    at_most: int = ACKS_PER_CHECK,
) -> dict[TP, range]:
    """Partitions whose group commit is below records the stage applied, with those offsets
    (at most `at_most` from the commit up): acknowledged to Faust, its commit moves past them."""
    behind: dict[TP, range] = {}
    for tp, offset in committed.items():
        applied = last_applied(tp)
        start = offset or 0
        if applied is not None and start <= applied:
            behind[tp] = range(start, min(applied + 1, start + at_most))
    return behind


def acknowledge_offsets(consumer: Any, offsets: Mapping[TP, Iterable[int]]) -> int:
    """Acknowledge applied offsets to Faust's consumer. Faust commits a partition only up to
    its first unacknowledged offset, and a record it never delivered (read back by the guard,
    or applied before a restart and dropped on redelivery) is never acknowledged by the stream:
    it would hold the group's commit below it for good. `Consumer.ack` takes a message; one
    made for the offset is what Faust keeps of it (an offset acknowledged or committed already
    is ignored); how many Faust had not had acknowledged."""
    newly = 0
    for tp, numbers in offsets.items():
        for offset in numbers:
            message = Message(tp.topic, tp.partition, offset, 0.0, 0, None, None, None, None)
            newly += bool(consumer.ack(message))
    return newly
