"""The HTTP API and the MCP server over the SDK (docs/architecture.md, "HTTP API and keys").

`create_app(settings)` is the FastAPI application `memstream serve` runs under uvicorn. Every
endpoint authenticates an API key (`memstream.api.keys`), lets `handlers.identity.authorize` decide
the memory user from the key's grant, and calls the SDK (`MemoryClient`) acting as the key's
principal: the web layer holds no business rule.

`create_app` is imported on first use: the API keys (`memstream.api.keys`) are read by the CLI,
which must not load FastAPI and the MCP server to build its parser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memstream.api.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from memstream.api.app import create_app

        return create_app
    raise AttributeError(f"module 'memstream.api' has no attribute {name!r}")
