"""Topic names in one place, and which events each topic carries."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topics:
    """The pipeline's topics; `prefix` lets tests and tenants run side by side on one cluster.

    `results_prefix` (None: `prefix`) names the topics the memory types' stages write — the
    memories and the dead letters — apart from those they read: a shadow extractor reads the live
    turns and snapshots and writes its own results (docs/architecture.md, "Re-extraction")."""

    prefix: str = "memstream."
    results_prefix: str | None = None

    @property
    def turns(self) -> str:
        """TurnRecorded, SessionFlushRequested, SessionIdled — keyed `user_id|session_id`."""
        return f"{self.prefix}turns"

    @property
    def snapshots(self) -> str:
        """SnapshotPromoted, MemorySaveRequested, MemoryRollbackRequested,
        MemoryConsolidationRequested — keyed by `user_id`."""
        return f"{self.prefix}snapshots"

    @property
    def memories(self) -> str:
        """SnapshotExtracted, MemorySaved, MemoryRolledBack, MemoriesConsolidated (and 0.1's
        standalone memory events) — keyed by user."""
        return f"{self.results_prefix or self.prefix}memories"

    @property
    def dead_letters(self) -> str:
        """InputDeadLettered — keyed by the original record's key."""
        return f"{self.results_prefix or self.prefix}dead-letters"

    @property
    def serving(self) -> str:
        """ReadModelSwitched — one key, so one partition: which read model is served
        (docs/architecture.md, "Promotion"). The deployment's, never a shadow's."""
        return f"{self.prefix}serving"

    def all(self) -> tuple[str, ...]:
        return (self.turns, self.snapshots, self.memories, self.dead_letters, self.serving)
