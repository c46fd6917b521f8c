"""The HTTP API's rollback routes (docs/architecture.md, "Rollback"): a POST writes one request
to the log and answers 202 with its id; a GET reads what the memory's stage decided."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from memstream.api import models as m
from memstream.api.auth import Authenticated
from memstream.api.paths import IdPath, UserPath
from memstream.api.problems import ApiProblem, Problem


def rollback_routes(router: APIRouter) -> None:
    """Add the rollback routes to `router`; authenticated and scoped like the other writes."""

    @router.post(
        "/users/{user_id}/memories/{memory_id}/rollback",
        status_code=202,
        response_model=m.RollbackAccepted,
        responses={404: {"model": Problem, "description": "The user has no such memory"}},
        tags=["write"],
    )
    async def rollback(
        user_id: UserPath, memory_id: IdPath, body: m.RollbackMemory, caller: Authenticated
    ) -> Any:
        """Restore one of the user's memories to an earlier version (a new version with its
        text); `requested_by` is the key's principal. The stage may refuse (an unknown
        version, the current one, an expired memory): the result says why."""
        user = await caller.user(user_id)
        rollback_id = await caller.memory.rollback(
            user,
            memory_id,
            body.to_version,
            requested_by=caller.memory.requested_by,
            reason=body.reason,
        )
        return caller.reply({"user_id": user, "rollback_id": rollback_id}, 202)

    @router.get(
        "/users/{user_id}/rollbacks/{rollback_id}",
        response_model=m.RollbackResult,
        responses={404: {"model": Problem, "description": "Not decided yet, or unknown"}},
        tags=["read"],
    )
    async def rollback_result(user_id: UserPath, rollback_id: IdPath, caller: Authenticated) -> Any:
        """What the rollback did (404 until its result is projected)."""
        user = await caller.user(user_id)
        found = await caller.memory.rollback_result(user, rollback_id)
        if found is None:
            raise ApiProblem(404, "not-found", f"no rollback {rollback_id!r} decided yet")
        return caller.reply(found)
