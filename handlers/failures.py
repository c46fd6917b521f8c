"""Which failures are outages to wait out, and which are the record's own fault.

The pipeline's rule (docs/architecture.md, "Delivery guarantees"): an *outage* — the broker, the
database, the LLM or the embedder unreachable or answering "try again" — is retried with
back-off for as long as it lasts and never advances a stage's progress; any other failure on a
record is *poison* (undecodable, invalid, too large, LLM output still invalid after its retries),
and the record is dead-lettered with the reason so the stream goes on.

Pure: the classification reads the exception's type names and the attributes the client
libraries document (aiokafka's `retriable`, pymongo's error labels and codes), so this module
imports neither library.
"""

from __future__ import annotations

from handlers.ports import ProviderUnavailable

OUTAGE_ERROR_TYPES = frozenset(
    {
        # aiokafka: the broker cannot be reached, or a request expired waiting for it.
        "KafkaConnectionError",
        "KafkaTimeoutError",
        "NodeNotReadyError",
        "RequestTimedOutError",
        "NoBrokersAvailable",
        # pymongo: the server cannot be reached (AutoReconnect, NetworkTimeout and
        # ServerSelectionTimeoutError are ConnectionFailures).
        "ConnectionFailure",
        "ExecutionTimeout",
        "WaitQueueTimeoutError",
        # The key store does not hold a key the log names: the wrong database or a backup older
        # than the log. Skipping would drop data and dead-lettering would blame the record, so
        # the stage waits (and says so) until an operator points it at the right key store.
        "UnknownKey",
        "NoKeyStore",
    }
)
"""Client-library exception types (matched by name, subclasses included) that mean an outage."""

TRANSIENT_ERROR_LABELS = ("RetryableWriteError", "TransientTransactionError", "NetworkError")
"""Labels a MongoDB server or driver puts on errors worth retrying."""

TRANSIENT_SERVER_CODES = frozenset(
    {
        1,  # InternalError: SecantusDB (beta) answers it under load; a retry succeeds
        6,  # HostUnreachable
        7,  # HostNotFound
        89,  # NetworkTimeout
        91,  # ShutdownInProgress
        189,  # PrimarySteppedDown
        262,  # ExceededTimeLimit
        9001,  # SocketException
        10107,  # NotWritablePrimary
        11600,  # InterruptedAtShutdown
        11602,  # InterruptedDueToReplStateChange
        13435,  # NotPrimaryNoSecondaryOk
        13436,  # NotPrimaryOrSecondary
    }
)
"""MongoDB server error codes that say "not now" rather than "not this"."""


def is_outage(exc: BaseException) -> bool:
    """Whether `exc` is an outage of something the pipeline depends on (retry, never
    dead-letter) rather than a problem with the record being processed.

    In order: a model provider said it is unavailable; the network failed (`ConnectionError`,
    `TimeoutError`); a client library raised one of `OUTAGE_ERROR_TYPES`; a Kafka error declared
    itself retriable; a MongoDB error carries a transient label or code. Anything else, including
    a Kafka error that declares itself not retriable (a record too large), is not an outage.
    """
    if isinstance(exc, ProviderUnavailable | ConnectionError | TimeoutError):
        return True
    names = {kind.__name__ for kind in type(exc).__mro__}
    if names & OUTAGE_ERROR_TYPES:
        return True
    if getattr(exc, "retriable", False) is True:
        return True
    has_label = getattr(exc, "has_error_label", None)
    if callable(has_label) and any(has_label(label) for label in TRANSIENT_ERROR_LABELS):
        return True
    return "OperationFailure" in names and getattr(exc, "code", None) in TRANSIENT_SERVER_CODES


def failure_reason(failure: str, result_id: str, *, sealed: bool) -> str:
    """The dead-letter reason for a snapshot whose extraction failed.

    A failure's details may quote the LLM's answer, which quotes the conversation. When content
    is sealed the details travel only in the (sealed) result, and the dead-letters topic, whose
    records are never sealed, gets the failure's kind — the text before its first colon — and
    the result that holds the rest."""
    if not sealed:
        return failure
    kind = failure.split(":", 1)[0].strip() or "extraction failed"
    return f"{kind} (details sealed in result {result_id})"
