"""Schemathesis against the OpenAPI document: generated requests to every endpoint (but the
endless `/v1/events?follow`), each answer checked against the document (status codes, content
types, schemas) and never a server error.

The operations are driven from a plain test (`as_strategy`): schemathesis' pytest plugin
(`from_fixture`) does not run under this pytest."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.support.api import ServedApi

pytestmark = pytest.mark.integration


def test_the_api_answers_as_its_openapi_document_says(api: ServedApi) -> None:
    schema = schemathesis.openapi.from_url(f"{api.url}/openapi.json").exclude(path="/v1/events")
    # an unrestricted application key: generated user ids are accepted, the calls run through
    headers = {"Authorization": f"Bearer {api.keys['app']}"}
    checked = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(
            max_examples=15,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def answers_as_documented(case: Any) -> None:
            # A schema-valid body may still break a rule the schema cannot say (a message's
            # role and content, the speaker-name rules): a documented 422, not a failure.
            case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])

        answers_as_documented()
        checked.append(operation.label)
    assert len(checked) == 18, checked
