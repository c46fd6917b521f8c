"""One pipeline with the HTTP API for the package (starting one takes seconds); tests use their own
users so they do not depend on each other."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.api import ServedApi, served_api
from tests.support.scripted_llm import ScriptedLLM


def facts(*statements: str) -> dict[str, Any]:
    return {
        "facts": [
            {"subject": "the user", "statement": s, "owner": "user", "category": "other"}
            for s in statements
        ]
    }


@pytest.fixture(scope="package")
def api(broker: Any, mongo: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApi]:
    with ScriptedLLM(default=facts()) as llm:
        llm.on("Stripe", facts("The user works at Stripe."), scope="last_user")
        llm.on("tea", facts("The user drinks green tea."), scope="last_user")
        with served_api(broker, mongo, llm, tmp_path_factory.mktemp("api")) as served:
            yield served
