"""memstream: long-term memory for AI agents, event-sourced on Kafka and MongoDB.

The public surface: `MemoryClient` (async), `SyncMemoryClient` (blocking), `HttpMemoryClient`
(the HTTP API, neither Kafka nor MongoDB needed), `Settings` and `load_settings`, and the types
the clients' results (`Memory`, `MemoryVersion`, `SearchHit`, `ErasureReceipt`, `Profile`,
`LlmUsage`, `Turn`, `Snapshot`, `Save`, `Rollback`, `TurnsReceipt`, `FlushReceipt`:
`memstream.sdk.results`, where the types of their nested values are too), and
`SearchFilters`, the keyword arguments every client's `search` takes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from memstream.config import Settings, load_settings

if TYPE_CHECKING:
    from memstream.sdk.client import MemoryClient
    from memstream.sdk.http_client import HttpMemoryClient
    from memstream.sdk.results import (
        ErasureReceipt,
        FlushReceipt,
        LlmUsage,
        Memory,
        MemoryVersion,
        Profile,
        Rollback,
        Save,
        SearchHit,
        Snapshot,
        Turn,
        TurnsReceipt,
    )
    from memstream.sdk.search_filters import SearchFilters
    from memstream.sdk.sync_client import SyncMemoryClient

__all__ = [
    "ErasureReceipt",
    "FlushReceipt",
    "HttpMemoryClient",
    "LlmUsage",
    "Memory",
    "MemoryClient",
    "MemoryVersion",
    "Profile",
    "Rollback",
    "Save",
    "SearchFilters",
    "SearchHit",
    "Settings",
    "Snapshot",
    "SyncMemoryClient",
    "Turn",
    "TurnsReceipt",
    "load_settings",
]
__version__ = "0.1.0"

_RESULTS = (
    "ErasureReceipt",
    "FlushReceipt",
    "LlmUsage",
    "Memory",
    "MemoryVersion",
    "Profile",
    "Rollback",
    "Save",
    "SearchHit",
    "Snapshot",
    "Turn",
    "TurnsReceipt",
)
_CLIENTS = {
    "MemoryClient": "memstream.sdk.client",
    "SyncMemoryClient": "memstream.sdk.sync_client",
    "HttpMemoryClient": "memstream.sdk.http_client",
    **dict.fromkeys(_RESULTS, "memstream.sdk.results"),
    "SearchFilters": "memstream.sdk.search_filters",
}


def __getattr__(name: str) -> Any:
    """The SDK clients and result types, imported when first asked for: a stage worker
    (`python -m memstream worker`) starts without the client's imports (docs/architecture.md,
    "Operations")."""
    if name in _CLIENTS:
        return getattr(importlib.import_module(_CLIENTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
