"""Whose memory a call writes to (docs/architecture.md, "Identity").

The standalone memory service uses the explicit `user_id` of every call. A deployed agent invoked
by a service account uses the service account's own id instead: any end-user `user_id` supplied
with such a call is ignored (and reported, so the caller can count and log it).

Over the HTTP API and MCP the caller is authenticated by an API key, and the key decides
(`authorize`): the identity is never taken from a flag in the request. The principal the server
resolved is recorded on the turn (or save) event, and the pipeline trusts only that
(`principal_problem`, checked by `handlers.inputs` for every record of the turns and snapshots
topics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from events.turns import Principal

GrantKind = Literal["application", "service_account"]


@dataclass(frozen=True)
class MemoryScope:
    """The resolved memory user, and the caller-supplied user id that was ignored (if any)."""

    user_id: str
    ignored_user_id: str | None = None


@dataclass(frozen=True)
class Grant:
    """What an API key may do: act as `principal`, on users starting with `user_prefix`
    (an application; `None`: any user that is not a service account's scope)."""

    principal: Principal
    user_prefix: str | None = None

    @property
    def kind(self) -> GrantKind:
        return "service_account" if self.principal.kind == "service_account" else "application"


class Refused(ValueError):
    """The key may not act on the requested user; the message says why."""


def resolve_scope(
    requested_user_id: str, principal: Principal | None, *, deployed_agent: bool
) -> MemoryScope:
    """The memory user of a call by `principal` asking for `requested_user_id`."""
    if deployed_agent and principal is not None and principal.kind == "service_account":
        ignored = requested_user_id if requested_user_id != principal.id else None
        return MemoryScope(principal.id, ignored)
    return MemoryScope(requested_user_id)


def authorize(
    grant: Grant, requested_user_id: str | None, *, service_accounts: frozenset[str]
) -> MemoryScope:
    """The memory user a key's call acts on, or `Refused`.

    A service account is a deployed agent's identity: its own id is the memory user, a supplied
    `user_id` is ignored (and returned as such, to be counted). An application names its user
    explicitly on every call; a prefix-restricted application only users under its prefix; no
    application reaches a service account's scope (`service_accounts`: their ids).
    """
    if grant.kind == "service_account":
        return resolve_scope(
            requested_user_id or grant.principal.id, grant.principal, deployed_agent=True
        )
    if not requested_user_id:
        raise Refused("an application key must name the user_id of every call")
    if grant.user_prefix is not None and not requested_user_id.startswith(grant.user_prefix):
        raise Refused(
            f"user_id {requested_user_id!r} is outside this key's prefix {grant.user_prefix!r}"
        )
    if requested_user_id in service_accounts:
        raise Refused(f"user_id {requested_user_id!r} is a service account's memory")
    return MemoryScope(requested_user_id)


def principal_problem(user_id: str, principal: Principal | None) -> str | None:
    """Why an event for `user_id` recorded by `principal` cannot be trusted, or `None`.

    A service account's events always belong to its own scope: an event claiming a service
    account for another user was not made by the server's identity decision.
    """
    if principal is not None and principal.kind == "service_account" and principal.id != user_id:
        return (
            f"a service account's memory user is its own id: principal {principal.id!r} "
            f"cannot record for user {user_id!r}"
        )
    return None


def whole_user_erasure(scope: MemoryScope) -> str:
    """The user a request to forget a *whole user* erases, or `Refused`.

    Any other call of a service account that names an end user acts on the account's own memory
    (the deployed-agent rule: the id is ignored and counted). Forgetting a whole user is the one
    call where that redirection would turn "forget this end user" into "forget everything this
    agent knows", so a service account must name itself (or nobody) to forget itself.
    """
    if scope.ignored_user_id is not None:
        raise Refused(
            f"a service account can forget only its own memory ({scope.user_id!r}), "
            f"not user {scope.ignored_user_id!r}"
        )
    return scope.user_id
