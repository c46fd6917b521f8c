"""Whose memory a call writes to (docs/architecture.md, "Identity").

The standalone memory service uses the explicit `user_id` of every call. A deployed agent invoked
by a service account uses the service account's own id instead: any end-user `user_id` supplied
with such a call is ignored (and reported, so the caller can count and log it).
"""

from __future__ import annotations

from dataclasses import dataclass

from events.turns import Principal


@dataclass(frozen=True)
class MemoryScope:
    """The resolved memory user, and the caller-supplied user id that was ignored (if any)."""

    user_id: str
    ignored_user_id: str | None = None


def resolve_scope(
    requested_user_id: str, principal: Principal | None, *, deployed_agent: bool
) -> MemoryScope:
    """The memory user of a call by `principal` asking for `requested_user_id`."""
    if deployed_agent and principal is not None and principal.kind == "service_account":
        ignored = requested_user_id if requested_user_id != principal.id else None
        return MemoryScope(principal.id, ignored)
    return MemoryScope(requested_user_id)
