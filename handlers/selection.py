"""Which users' snapshots a memory type's stage decides: all of them, or a shadow's selection
(`memstream reextract --users … --since …`, docs/architecture.md, "Re-extraction").

A selection leaves out the snapshots, direct saves, rollbacks and consolidations of the users it
does not name, and the snapshots and saves that happened before `since` (their event time, so a
replay selects the same). Forgetting is never left out: what a request erases is erased in every
read model, selected or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from events.consolidations import MemoryConsolidationRequested
from events.rollbacks import MemoryRollbackRequested
from events.saves import MemorySaveRequested
from events.snapshots import SnapshotPromoted

Selectable = (
    SnapshotPromoted | MemorySaveRequested | MemoryRollbackRequested | MemoryConsolidationRequested
)


@dataclass(frozen=True)
class Selection:
    """The users whose records are decided (empty: every user) and the earliest event time of a
    snapshot or save decided (None: from the start)."""

    users: frozenset[str] = frozenset()
    since: datetime | None = None

    def takes(self, event: object) -> bool:
        """Whether the stage decides `event` (anything but a selectable record: always)."""
        if not isinstance(event, Selectable):
            return True
        if self.users and event.user_id not in self.users:
            return False
        if self.since is not None and isinstance(event, SnapshotPromoted | MemorySaveRequested):
            return event.occurred_at >= self.since
        return True


EVERYTHING = Selection()
