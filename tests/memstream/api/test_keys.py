"""API keys: `memstream keys create|list|revoke`, hashed at rest, revocation immediate."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from typing import Any

import pytest
from pymongo import MongoClient

from memstream.api.keys import KEYS, InvalidKey, KeyStore
from memstream.cli.main import main

pytestmark = pytest.mark.integration


@pytest.fixture
def database(mongo: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> str:
    name = f"keys_{uuid.uuid4().hex[:8]}"
    config = tmp_path / "config.yaml"
    config.write_text("# environment only\n")
    monkeypatch.setenv("MEMSTREAM_CONFIG", str(config))
    monkeypatch.setenv("MONGODB_URI", mongo.uri)
    monkeypatch.setenv("MONGODB_DATABASE", name)
    return name


def authenticate(mongo: Any, database: str, key: str) -> Any:
    async def check() -> Any:
        store = KeyStore(mongo.uri, database)
        try:
            return await store.authenticate(key)
        finally:
            await store.close()

    return asyncio.run(check())


def test_keys_are_created_listed_and_revoked_and_only_their_hash_is_stored(
    mongo: Any, database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["keys", "create", "--name", "web", "--application", "acme", "--user-prefix", "acme-"])
        == 0
    )
    key = capsys.readouterr().out.strip()
    assert key.startswith("msk_")
    assert main(["keys", "create", "--name", "bot", "--service-account", "svc-1"]) == 0
    bot_key = capsys.readouterr().out.strip()

    found = authenticate(mongo, database, key)
    assert (found.grant.principal.kind, found.grant.principal.id) == ("application", "acme")
    assert found.grant.user_prefix == "acme-"
    assert authenticate(mongo, database, bot_key).grant.kind == "service_account"

    stored = list(MongoClient(mongo.uri)[database][KEYS].find())
    secret = key.split("_", 2)[2]
    assert all(secret not in str(document) for document in stored)
    assert any(d["hash"] == hashlib.sha256(secret.encode()).hexdigest() for d in stored)

    assert main(["keys", "list"]) == 0
    listing = capsys.readouterr().out
    assert "acme (users acme-*)" in listing and "svc-1" in listing and secret not in listing

    assert main(["keys", "revoke", found.key_id]) == 0
    with pytest.raises(InvalidKey, match="revoked"):
        authenticate(mongo, database, key)
    assert main(["keys", "revoke", found.key_id]) == 1


def test_a_key_that_is_malformed_or_unknown_or_wrong_is_refused(mongo: Any, database: str) -> None:
    for key in ("", "nope", "msk_", "msk_abc_def", "sk-openai-like"):
        with pytest.raises(InvalidKey):
            authenticate(mongo, database, key)


def test_a_service_account_key_takes_no_user_prefix(database: str) -> None:
    assert (
        main(["keys", "create", "--name", "x", "--service-account", "svc", "--user-prefix", "a-"])
        == 2
    )


def test_a_key_made_with_an_expiry_and_a_rate_limit_lists_both(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command = ["keys", "create", "--name", "ci", "--application", "ci"]
    assert main([*command, "--expires-in", "90d", "--rate-limit", "600"]) == 0
    capsys.readouterr()
    assert main(["keys", "list"]) == 0
    listing = capsys.readouterr().out
    assert "expires 20" in listing and "600/min" in listing
    with pytest.raises(SystemExit):
        main([*command, "--expires-in", "soon"])
