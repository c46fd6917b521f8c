"""memstream: long-term memory for AI agents, event-sourced on Kafka and MongoDB.

The public surface: `MemoryClient` (async), `SyncMemoryClient` (blocking), `HttpMemoryClient`
(the HTTP API, neither Kafka nor MongoDB needed), `Settings` and `load_settings`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from memstream.config import Settings, load_settings

if TYPE_CHECKING:
    from memstream.sdk.client import MemoryClient
    from memstream.sdk.http_client import HttpMemoryClient
    from memstream.sdk.sync_client import SyncMemoryClient

__all__ = ["HttpMemoryClient", "MemoryClient", "Settings", "SyncMemoryClient", "load_settings"]
__version__ = "0.1.0"

_CLIENTS = {
    "MemoryClient": "memstream.sdk.client",
    "SyncMemoryClient": "memstream.sdk.sync_client",
    "HttpMemoryClient": "memstream.sdk.http_client",
}


def __getattr__(name: str) -> Any:
    """The SDK clients, imported when first asked for: a stage worker (`python -m memstream
    worker`) starts without the client's imports (docs/architecture.md, "Operations")."""
    if name in _CLIENTS:
        return getattr(importlib.import_module(_CLIENTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
