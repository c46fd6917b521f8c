"""Who is calling: the API key of the request, its grant, and the memory user it acts on.

The identity decision is `handlers.identity.authorize`, from the key's grant alone; nothing in
the request body or query can change whose memory a call reaches except an application's
explicit `user_id`, which the grant checks (docs/architecture.md, "HTTP API and keys").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Annotated, Any

import orjson
from fastapi import Depends, Request
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from handlers.identity import MemoryScope, Refused, authorize, whole_user_erasure
from memstream.api.keys import InvalidKey, Key, KeyStore
from memstream.sdk.client import MemoryClient

log = logging.getLogger(__name__)
IGNORED_HEADER = "Memstream-Ignored-User-Id"
bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key from `memstream keys create`, as `Authorization: Bearer msk_…`.",
)


@dataclass
class Caller:
    """One authenticated request: its key, and the SDK acting as the key's principal."""

    key: Key
    keys: KeyStore
    memory: MemoryClient
    headers: dict[str, str] = field(default_factory=dict)

    async def user(self, requested: str | None) -> str:
        """The memory user this call acts on (`Refused` if the key may not act on it)."""
        scope = await self._scope(requested)
        if scope.ignored_user_id is not None:
            await self.keys.count_ignored(self.key.key_id)
            self.headers[IGNORED_HEADER] = scope.ignored_user_id
            log.warning(
                "service account %r: ignored end-user user_id %r",
                scope.user_id,
                scope.ignored_user_id,
            )
        return scope.user_id

    async def whole_user(self, requested: str) -> str:
        """The user a request to forget a whole user erases: as `user`, but a service account
        must name itself (`handlers.identity.whole_user_erasure`)."""
        return whole_user_erasure(await self._scope(requested))

    async def may_read(self, user_id: str) -> bool:
        """May this key read `user_id`'s data as named (not replaced by its own id)?"""
        try:
            scope = await self._scope(user_id)
        except Refused:
            return False
        return scope.ignored_user_id is None

    async def _scope(self, requested: str | None) -> MemoryScope:
        service_accounts = (
            frozenset()
            if self.key.grant.kind == "service_account"
            else await self.keys.service_accounts()
        )
        return authorize(self.key.grant, requested, service_accounts=service_accounts)

    def reply(self, content: Any, status: int = 200) -> Response:
        return Response(
            orjson.dumps(content, default=_jsonable, option=orjson.OPT_SERIALIZE_NUMPY),
            status,
            headers=self.headers,
            media_type="application/json",
        )


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


async def authenticated(keys: KeyStore, memory: MemoryClient, key: str) -> Caller:
    """The caller holding `key` (`InvalidKey` if it is unknown, revoked or expired;
    `RateLimited` over its rate): the SDK acting as the key's principal. Shared by the HTTP
    endpoints and the MCP tools."""
    found = await keys.authenticate(key)
    await keys.count_request(found)
    view = memory.acting_as(
        found.grant.principal, deployed_agent=found.grant.kind == "service_account"
    )
    return Caller(found, keys, view)


async def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    """The request's caller; a missing, unknown or revoked key is refused (401)."""
    if credentials is None:
        raise InvalidKey("an API key is required: Authorization: Bearer <key>")
    return await authenticated(
        request.app.state.keys, request.app.state.memory, credentials.credentials
    )


Authenticated = Annotated[Caller, Depends(caller)]
