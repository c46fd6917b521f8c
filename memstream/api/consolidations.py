"""The HTTP API's consolidation routes (docs/architecture.md, "Consolidation"): a POST writes
one request to the log and answers 202 with its id; a GET reads what each memory type's stage
decided (the runs so far, and whether every requested type has answered)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from memstream.api import models as m
from memstream.api.auth import Authenticated
from memstream.api.paths import IdPath, UserPath
from memstream.api.problems import ApiProblem, Problem
from memstream.sdk.results import consolidation_complete


def consolidation_routes(router: APIRouter) -> None:
    """Add the consolidation routes to `router`; authenticated and scoped like the writes."""

    @router.post(
        "/users/{user_id}/consolidations",
        status_code=202,
        response_model=m.ConsolidationAccepted,
        tags=["write"],
    )
    async def consolidate(
        user_id: UserPath, body: m.ConsolidateMemories, caller: Authenticated
    ) -> Any:
        """Merge the user's near-duplicate memories and supersede contradicting ones, one LLM
        call per cluster within `max_calls`; `requested_by` is the key's principal."""
        user = await caller.user(user_id)
        consolidation_id = await caller.memory.consolidate(
            user,
            memory_types=body.memory_types,
            max_calls=body.max_calls,
            requested_by=caller.memory.requested_by,
            reason=body.reason,
        )
        return caller.reply({"user_id": user, "consolidation_id": consolidation_id}, 202)

    @router.get(
        "/users/{user_id}/consolidations/{consolidation_id}",
        response_model=m.ConsolidationResult,
        responses={404: {"model": Problem, "description": "Not decided yet, or unknown"}},
        tags=["read"],
    )
    async def consolidation_result(
        user_id: UserPath, consolidation_id: IdPath, caller: Authenticated
    ) -> Any:
        """What the consolidation did so far (404 until a first run is projected)."""
        user = await caller.user(user_id)
        runs = await caller.memory.consolidation_result(user, consolidation_id)
        if not runs:
            raise ApiProblem(404, "not-found", f"no consolidation {consolidation_id!r} decided yet")
        return caller.reply(
            {
                "user_id": user,
                "consolidation_id": consolidation_id,
                "complete": consolidation_complete(runs),
                "runs": runs,
            }
        )
