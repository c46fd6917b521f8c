"""Whose memory a call writes to (service-account identity)."""

from __future__ import annotations

import pytest

from events import Principal
from handlers.identity import MemoryScope, resolve_scope


@pytest.mark.parametrize(
    "principal",
    [
        None,
        Principal(kind="end_user", id="u1"),
        Principal(kind="application", id="app-1"),
        Principal(kind="service_account", id="sa-1"),
    ],
    ids=["anonymous", "end-user", "application", "service-account"],
)
def test_standalone_service_uses_the_explicit_user_id(principal: Principal | None) -> None:
    assert resolve_scope("u1", principal, deployed_agent=False) == MemoryScope("u1")


def test_service_account_on_a_deployed_agent_uses_its_own_id() -> None:
    scope = resolve_scope("u1", Principal(kind="service_account", id="sa-1"), deployed_agent=True)
    assert scope.user_id == "sa-1"
    assert scope.ignored_user_id == "u1"


def test_service_account_asking_for_itself_ignores_nothing() -> None:
    scope = resolve_scope("sa-1", Principal(kind="service_account", id="sa-1"), deployed_agent=True)
    assert scope == MemoryScope("sa-1", None)


def test_all_calls_through_one_service_account_share_a_scope() -> None:
    account = Principal(kind="service_account", id="sa-1")
    scopes = {resolve_scope(u, account, deployed_agent=True).user_id for u in ("u1", "u2", "u3")}
    assert scopes == {"sa-1"}


@pytest.mark.parametrize(
    "principal",
    [None, Principal(kind="end_user", id="u9"), Principal(kind="application", id="app-1")],
    ids=["anonymous", "end-user", "application"],
)
def test_deployed_agent_without_a_service_account_uses_the_explicit_id(
    principal: Principal | None,
) -> None:
    assert resolve_scope("u1", principal, deployed_agent=True) == MemoryScope("u1")
