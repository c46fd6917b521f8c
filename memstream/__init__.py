"""memstream: long-term memory for AI agents, event-sourced on Kafka and MongoDB.

The public surface: `MemoryClient` (async), `SyncMemoryClient` (blocking), `HttpMemoryClient`
(the HTTP API, neither Kafka nor MongoDB needed), `Settings` and `load_settings`, and the types
the clients' reads return (`Memory`, `MemoryVersion`, `SearchHit`, `ErasureReceipt`, `Profile`,
`LlmUsage`: `memstream.sdk.results`).
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
        LlmUsage,
        Memory,
        MemoryVersion,
        Profile,
        SearchHit,
    )
    from memstream.sdk.sync_client import SyncMemoryClient

__all__ = [
    "ErasureReceipt",
    "HttpMemoryClient",
    "LlmUsage",
    "Memory",
    "MemoryClient",
    "MemoryVersion",
    "Profile",
    "SearchHit",
    "Settings",
    "SyncMemoryClient",
    "load_settings",
]
__version__ = "0.1.0"

_RESULTS = ("ErasureReceipt", "LlmUsage", "Memory", "MemoryVersion", "Profile", "SearchHit")
_CLIENTS = {
    "MemoryClient": "memstream.sdk.client",
    "SyncMemoryClient": "memstream.sdk.sync_client",
    "HttpMemoryClient": "memstream.sdk.http_client",
    **{
        name: "memstream.sdk.results"
        for name in (
            "ErasureReceipt",
            "LlmUsage",
            "Memory",
            "MemoryVersion",
            "Profile",
            "SearchHit",
        )
    },
}


def __getattr__(name: str) -> Any:
    """The SDK clients, imported when first asked for: a stage worker (`python -m memstream
    worker`) starts without the client's imports (docs/architecture.md, "Operations")."""
    if name in _CLIENTS:
        return getattr(importlib.import_module(_CLIENTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
