"""Outages are waited out; everything else a record runs into is poison."""

from __future__ import annotations

import pytest
from aiokafka import errors as kafka
from pymongo import errors as mongo

from events import EventDecodeError, EventTooLarge
from handlers.extraction.base import InvalidExtraction
from handlers.failures import is_outage
from handlers.ports import EmbeddingUnavailable, LLMUnavailable


@pytest.mark.parametrize(
    "failure",
    [
        LLMUnavailable("503"),
        EmbeddingUnavailable("connection refused"),
        ConnectionRefusedError(),
        TimeoutError(),
        TimeoutError(),
        kafka.KafkaConnectionError("broker down"),
        kafka.KafkaTimeoutError("batch expired"),
        kafka.NodeNotReadyError(),
        kafka.RequestTimedOutError(),
        kafka.NotLeaderForPartitionError(),
        mongo.AutoReconnect("primary gone"),
        mongo.ServerSelectionTimeoutError("no servers"),
        mongo.NetworkTimeout("slow"),
        mongo.OperationFailure("internal error", code=1),
        mongo.OperationFailure("shutting down", code=91),
        mongo.NotPrimaryError("stepped down"),
    ],
    ids=lambda failure: type(failure).__name__,
)
def test_infrastructure_failures_are_outages(failure: BaseException) -> None:
    assert is_outage(failure)


@pytest.mark.parametrize(
    "failure",
    [
        EventDecodeError("not JSON"),
        EventTooLarge("too large"),
        InvalidExtraction("no facts list"),
        ValueError("a bug"),
        KeyError("a bug"),
        kafka.MessageSizeTooLargeError(),  # retrying the same record cannot help
        kafka.KafkaError("unknown"),
        mongo.DuplicateKeyError("E11000"),
        mongo.OperationFailure("bad update", code=9),
        mongo.DocumentTooLarge("16 MB"),
    ],
    ids=lambda failure: type(failure).__name__,
)
def test_other_failures_are_the_records_own(failure: BaseException) -> None:
    assert not is_outage(failure)


def test_a_sealed_failure_dead_letters_its_kind_and_the_result_not_its_details() -> None:
    from handlers.failures import failure_reason

    failure = "invalid LLM output: 'I work at Stripe' is not JSON"
    assert failure_reason(failure, "r1", sealed=False) == failure
    sealed = failure_reason(failure, "r1", sealed=True)
    assert sealed == "invalid LLM output (details sealed in result r1)"
    assert "Stripe" not in sealed
