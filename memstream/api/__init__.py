"""The HTTP API and the MCP server over the SDK (docs/architecture.md, "HTTP API and keys").

`create_app(settings)` is the FastAPI application `memstream serve` runs under uvicorn. Every
endpoint authenticates an API key (`memstream.api.keys`), lets `handlers.identity.authorize` decide
the memory user from the key's grant, and calls the SDK (`MemoryClient`) acting as the key's
principal: the web layer holds no business rule.
"""

from memstream.api.app import create_app

__all__ = ["create_app"]
