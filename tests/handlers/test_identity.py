"""Whose memory a call writes to (service-account identity)."""

from __future__ import annotations

import pytest

from events import Principal
from handlers.identity import (
    Grant,
    MemoryScope,
    Refused,
    authorize,
    principal_problem,
    resolve_scope,
    whole_user_erasure,
)


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


ACCOUNT = Grant(Principal(kind="service_account", id="sa-1"))
APP = Grant(Principal(kind="application", id="app-1"))
ACME = Grant(Principal(kind="application", id="acme"), user_prefix="acme-")
NO_ACCOUNTS: frozenset[str] = frozenset()


def test_a_service_account_key_acts_on_its_own_id_and_reports_the_ignored_user() -> None:
    assert authorize(ACCOUNT, "tim", service_accounts=NO_ACCOUNTS) == MemoryScope("sa-1", "tim")
    assert authorize(ACCOUNT, None, service_accounts=NO_ACCOUNTS) == MemoryScope("sa-1")


def test_an_application_key_acts_on_the_user_it_names() -> None:
    assert authorize(APP, "tim", service_accounts=NO_ACCOUNTS) == MemoryScope("tim")


def test_an_application_key_must_name_a_user() -> None:
    with pytest.raises(Refused, match="must name the user_id"):
        authorize(APP, None, service_accounts=NO_ACCOUNTS)


def test_a_prefixed_application_key_is_refused_users_outside_its_prefix() -> None:
    assert authorize(ACME, "acme-tim", service_accounts=NO_ACCOUNTS) == MemoryScope("acme-tim")
    with pytest.raises(Refused, match="outside this key's prefix"):
        authorize(ACME, "globex-tim", service_accounts=NO_ACCOUNTS)


def test_no_application_key_reaches_a_service_accounts_memory() -> None:
    with pytest.raises(Refused, match="service account's memory"):
        authorize(APP, "sa-1", service_accounts=frozenset({"sa-1"}))


def test_an_event_claiming_a_service_account_for_another_user_is_a_problem() -> None:
    account = Principal(kind="service_account", id="sa-1")
    assert principal_problem("sa-1", account) is None
    assert principal_problem("tim", Principal(kind="application", id="app-1")) is None
    assert principal_problem("tim", None) is None
    assert "cannot record for user 'tim'" in (principal_problem("tim", account) or "")


def test_a_service_account_forgets_a_whole_user_only_when_it_names_itself() -> None:
    account = Grant(Principal(kind="service_account", id="sa-1"))
    named_itself = authorize(account, "sa-1", service_accounts=frozenset())
    assert whole_user_erasure(named_itself) == "sa-1"
    assert whole_user_erasure(authorize(account, None, service_accounts=frozenset())) == "sa-1"
    with pytest.raises(Refused, match="only its own memory"):
        whole_user_erasure(authorize(account, "end-user-7", service_accounts=frozenset()))


def test_an_application_forgets_the_user_it_names() -> None:
    app = Grant(Principal(kind="application", id="acme"), user_prefix="acme-")
    assert whole_user_erasure(authorize(app, "acme-1", service_accounts=frozenset())) == "acme-1"
