"""How the HTTP API answers failures it did not expect: an outage is a 503, a bug a 500."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient
from pymongo.errors import ServerSelectionTimeoutError

from memstream.api.problems import OUTAGE_RETRY_AFTER_SECONDS, install


def app_raising(error: Exception) -> TestClient:
    app = FastAPI()
    install(app)

    @app.get("/fail")
    async def fail() -> None:
        raise error

    return TestClient(app, raise_server_exceptions=False)


def test_a_database_outage_is_answered_503_with_retry_after() -> None:
    answer = app_raising(ServerSelectionTimeoutError("no server")).get("/fail")
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == str(OUTAGE_RETRY_AFTER_SECONDS)
    assert answer.json()["type"].endswith("unavailable")


def test_any_other_unexpected_error_is_a_500_naming_only_its_type() -> None:
    answer = app_raising(RuntimeError("secret detail")).get("/fail")
    assert answer.status_code == 500
    assert "secret" not in answer.text and "RuntimeError" in answer.text


def test_an_unknown_memory_type_is_a_422_naming_the_known_ones() -> None:
    from memstream.sdk.memory_types import UnknownMemoryType

    answer = app_raising(UnknownMemoryType("unknown memory type 'tickets'; the ...")).get("/fail")
    assert answer.status_code == 422
    assert answer.json()["type"].endswith("unknown-memory-type")
    assert "'tickets'" in answer.json()["detail"]
