"""memstream: long-term memory for AI agents, event-sourced on Kafka and MongoDB."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memstream.config import Settings, load_settings

if TYPE_CHECKING:
    from memstream.client import MemoryClient
    from memstream.sync_client import SyncMemoryClient

__all__ = ["MemoryClient", "Settings", "SyncMemoryClient", "load_settings"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """The SDK clients, imported when first asked for: a stage worker (`python -m memstream
    worker`) starts without the client's imports (docs/architecture.md, "Operations")."""
    if name == "MemoryClient":
        from memstream.client import MemoryClient

        return MemoryClient
    if name == "SyncMemoryClient":
        from memstream.sync_client import SyncMemoryClient

        return SyncMemoryClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
