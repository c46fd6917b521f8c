"""The settings' sections: the broker, the database, the LLM, the embedder, the window, the
extraction and reconciliation knobs, the limits, the HTTP API and operations
(docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from events.base import UtcDatetime
from events.codec import MAX_EVENT_BYTES
from events.memories import MEMORY_TYPES, MemoryType
from events.topics import Topics
from events.turns import MAX_CONTENT_CHARS
from handlers.extraction.base import DEFAULT_MAX_ANSWER_BYTES, DEFAULT_MAX_MEMORIES
from handlers.window import (
    DEFAULT_DEDUP_HORIZON,
    DEFAULT_MAX_SNAPSHOT_BYTES,
    SNAPSHOT_ENVELOPE_BYTES,
)
from memstream.extractors import memory_types_named
from streams.kafka_security import KafkaSecurity, SaslMechanism, SecurityProtocol


class SettingProblem(ValueError):
    """A problem a section's validator finds with one of its settings, located by `path` (so
    the message names the setting and its environment variable, as a field's own error does)."""

    def __init__(self, path: tuple[str, ...], message: str, value: Any) -> None:
        super().__init__(message)
        self.path = path
        self.value = value


class Section(BaseModel):
    """One part of the settings: unknown keys refused, values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSettings(Section):
    bootstrap_servers: str | None = None
    topic_prefix: str = Field(default="memstream.", pattern=r"^[A-Za-z0-9._-]*$", max_length=100)
    results_topic_prefix: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9._-]*$", max_length=150
    )
    """The prefix of the topics the stages write (memories, dead letters); unset:
    `topic_prefix`. A shadow extractor's own (`memstream reextract`)."""
    partitions: int = Field(default=16, ge=1, le=1024)
    """Partitions of every topic, made once: how many workers of one stage can share its work
    (a worker per partition at most). Adding partitions later would move users away from
    their state, so the default leaves room to scale out; each partition costs the broker a
    few files and a worker a changelog partition per table (docs/operations.md, "Running on more
    than one machine"). Existing topics keep their count (`memstream.runtime.topics`)."""
    replication_factor: int = Field(default=1, ge=1, le=10)
    group_prefix: str = Field(default="memstream-", pattern=r"^[A-Za-z0-9._-]*$", max_length=100)
    session_timeout_seconds: float = Field(default=6.0, gt=0)
    heartbeat_interval_seconds: float = Field(default=1.0, gt=0)
    producer_max_batch_size: int | None = Field(default=None, ge=1)
    """Set to 1 on Tansu (its end offsets are wrong after multi-record batches)."""
    producer_request_timeout_seconds: float | None = Field(default=None, gt=0)
    """How long a stage's send waits for the broker before it fails (and is retried by the
    stage); unset: Faust's default, 1,200 s."""
    idempotent_producer: Literal["auto", "on", "off"] = "auto"
    """The SDK producer's Kafka idempotence (no duplicates from its own retries); `auto` uses
    it where the broker supports it (Tansu does not). The window drops a re-sent turn by its
    event id either way."""
    security_protocol: SecurityProtocol = "PLAINTEXT"
    """How every Kafka connection is made: PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or SASL_SSL
    (a login over TLS: Confluent Cloud, MSK, Aiven, Redpanda Cloud)."""
    sasl_mechanism: SaslMechanism = "PLAIN"
    """With SASL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (a user and password) or OAUTHBEARER (a
    token read from `sasl_oauth_token_file` at every login)."""
    sasl_username: str | None = None
    sasl_password: str | None = None
    sasl_oauth_token_file: Path | None = None
    ssl_cafile: Path | None = None
    """PEM certificates of the authorities that sign the brokers' certificates (unset: the
    system's)."""
    ssl_certfile: Path | None = None
    """This client's PEM certificate, for a listener that requires one (mutual TLS)."""
    ssl_keyfile: Path | None = None
    """The key of `ssl_certfile` (PEM; may be in `ssl_certfile` itself)."""
    ssl_key_password: str | None = None
    ssl_check_hostname: bool = True
    """Whether a broker's certificate must name the host connected to."""

    @property
    def topics(self) -> Topics:
        return Topics(self.topic_prefix, self.results_topic_prefix)

    @model_validator(mode="after")
    def _complete_login(self) -> KafkaSettings:
        uses_sasl = self.security_protocol.startswith("SASL_")
        if uses_sasl and self.sasl_mechanism == "OAUTHBEARER":
            if self.sasl_oauth_token_file is None:
                raise ValueError(
                    "sasl_mechanism OAUTHBEARER needs sasl_oauth_token_file "
                    "(KAFKA_SASL_OAUTH_TOKEN_FILE)"
                )
        elif uses_sasl and not (self.sasl_username and self.sasl_password):
            raise ValueError(
                f"security_protocol {self.security_protocol} with {self.sasl_mechanism} needs "
                "sasl_username and sasl_password (KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD)"
            )
        if self.ssl_keyfile is not None and self.ssl_certfile is None:
            raise ValueError("ssl_keyfile needs ssl_certfile (KAFKA_SSL_CERTFILE)")
        return self

    def client_options(self) -> dict[str, Any]:
        """The servers and security keyword arguments of an aiokafka producer, consumer or
        admin client."""
        return {"bootstrap_servers": self.bootstrap_servers, **self.security.client_options()}

    @property
    def security(self) -> KafkaSecurity:
        """What every Kafka client memstream creates connects with."""

        def text(path: Path | None) -> str | None:
            return str(path) if path is not None else None

        return KafkaSecurity(
            protocol=self.security_protocol,
            sasl_mechanism=self.sasl_mechanism,
            sasl_username=self.sasl_username,
            sasl_password=self.sasl_password,
            sasl_oauth_token_file=text(self.sasl_oauth_token_file),
            ssl_cafile=text(self.ssl_cafile),
            ssl_certfile=text(self.ssl_certfile),
            ssl_keyfile=text(self.ssl_keyfile),
            ssl_key_password=self.ssl_key_password,
            ssl_check_hostname=self.ssl_check_hostname,
        )


class MongoSettings(Section):
    uri: str | None = None
    database: str = Field(default="memstream", pattern=r"^[A-Za-z0-9_-]{1,60}$")
    """The read model's database."""
    keys_database: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,60}$")
    """The data keys' database (`memstream.keystore`); unset: the read model's. A shadow read
    model (`memstream reextract`) keeps the live one's keys: one log, one key store."""

    @property
    def keys_database_name(self) -> str:
        """Where the data keys are: `keys_database`, else the read model's database."""
        return self.keys_database or self.database


class LLMSettings(Section):
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    timeout_seconds: float = Field(default=120.0, gt=0)
    max_attempts: int = Field(default=3, ge=1, le=10)
    max_in_flight: int = Field(default=16, ge=1, le=1_024)
    """LLM calls one memory type's worker keeps in flight at once (each stage worker has its
    own): a hosted endpoint serves many requests at a time; a local CPU model one
    (`memstream up` sets 1 for the packaged model)."""
    daily_token_budget: int | None = Field(default=None, ge=1)
    """LLM tokens (prompt and completion) one user's extraction may spend per UTC day; over it,
    the user's snapshots wait in the log until the next day (docs/operations.md, "Quotas").
    Unset: none."""
    budget_check_seconds: float = Field(default=60.0, gt=0, le=3_600)
    """How often a snapshot waiting for its user's budget looks again."""
    max_tokens: int = Field(default=1024, ge=16, le=32_768)
    """Bounds each answer (small models in JSON mode may otherwise emit whitespace forever)."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature of extraction and reconciliation calls (0: the most likely answer)."""
    local: Literal["auto", "small", "large", "off"] = "auto"
    """With no endpoint configured, `up`/`demo` start a local llama.cpp server with a packaged
    model (`auto` = `large`, or the GGUF file `MEMSTREAM_LOCAL_MODEL`); `off` refuses instead."""
    local_repeatable: bool = False
    """The local server evaluates every prompt whole, from an empty context: the same request
    gets the same answer whatever was asked before it, slower (no prompt reused; for benchmarks
    that compare runs; `memstream.runtime.local.llama_server`, "Repeatable answers")."""

    @property
    def configured(self) -> bool:
        return bool(self.base_url or self.api_key)

    def missing(self) -> list[str]:
        """What must still be set before a remote LLM can be used (empty when ready)."""
        if not self.configured:
            return ["OPENAI_BASE_URL (or OPENAI_API_KEY for api.openai.com)"]
        return [] if self.model else ["MEMSTREAM_LLM_MODEL (the chat model's name)"]


class EmbeddingSettings(Section):
    provider: Literal["local", "openai"] = "local"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None


class WindowSettings(Section):
    max_messages: int = Field(default=20, ge=1, le=1_000)
    idle_timeout_seconds: float = Field(default=300.0, gt=0)
    idle_check_interval_seconds: float = Field(default=5.0, gt=0)
    dedup_horizon_seconds: float = Field(
        default=DEFAULT_DEDUP_HORIZON.total_seconds(), ge=1, le=30 * 24 * 3600
    )
    """How long a quiet session's window (nothing pending) is kept after its latest turn, to
    recognise re-sent turns; then it is retired (`handlers.window.DEFAULT_DEDUP_HORIZON`)."""
    max_snapshot_bytes: int = Field(
        default=DEFAULT_MAX_SNAPSHOT_BYTES,
        ge=10_000,
        le=MAX_EVENT_BYTES - SNAPSHOT_ENVELOPE_BYTES,
    )
    """A window is promoted early when its next turn would make the snapshot larger than this."""
    max_tokens: int | None = Field(default=None, ge=50, le=1_000_000)
    """A window is promoted early when its next turn would take its estimated tokens past this
    (`handlers.snapshot_size`); None: no token budget."""
    topic_shift_threshold: float | None = Field(default=None, ge=-1.0, le=1.0)
    """A window is promoted early when its next turn's embedding has a cosine similarity below
    this with the mean of its pending turns' (`handlers.topic_shift`); None: no such trigger."""
    topic_shift_min_turns: int = Field(default=2, ge=1, le=1_000)
    """The embedded turns a window holds before a turn can leave its topic."""


class ExtractionSettings(Section):
    enabled: tuple[MemoryType, ...] = MEMORY_TYPES
    """Types extracted automatically from every snapshot; the others accept direct saves only."""
    only_users: tuple[str, ...] = ()
    """Only these users' snapshots, saves, rollbacks and consolidations are decided (empty:
    every user's): a shadow's selection (`memstream reextract --users`). Forgetting applies to
    every user whatever this says."""
    since: UtcDatetime | None = None
    """Only snapshots and saves that happened at or after this time are decided (a shadow's
    `--since`)."""

    @field_validator("only_users", mode="before")
    @classmethod
    def _user_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("enabled", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return memory_types_named(value)

    @field_validator("enabled")
    @classmethod
    def _unique(cls, value: tuple[MemoryType, ...]) -> tuple[MemoryType, ...]:
        return tuple(dict.fromkeys(value))


class ReconcileSettings(Section):
    """Similarity thresholds of reconciliation (`handlers.reconcile`), for the embedding model in
    use. The defaults were chosen for the local model on a labelled set of memory pairs
    (`bench/reconcile_eval`); another embedding model needs its own (rerun that benchmark)."""

    reinforce_threshold: float = Field(default=0.995, ge=-1, le=1)
    """At or above: the new memory restates the most similar one (REINFORCE, no LLM call)."""
    ask_threshold: float = Field(default=0.89, ge=-1, le=1)
    """At or above (and below `reinforce_threshold`): the LLM decides among the candidates."""
    max_options: int = Field(default=3, ge=1, le=10)
    """How many candidates the LLM is shown at most."""
    consolidate_threshold: float | None = Field(default=None, ge=-1, le=1)
    """At or above: two current memories of one subject are one consolidation cluster
    (docs/architecture.md, "Consolidation"). Unset: `ask_threshold`."""
    questions_per_call: int = Field(default=1, ge=1, le=8)
    """Ambiguous memories asked about in one LLM call (`reconcile-batch-1` above 1). 1 by
    default: on the labelled pairs the packaged 1.5B model decided 74/102 right one at a time
    and 55/102 four at a time (BENCHMARKS.md, "Reconciliation on labelled pairs"); a stronger
    hosted model may take more, measured with `bench/reconcile_eval/run.py --batch N`."""

    @model_validator(mode="after")
    def _ordered(self) -> ReconcileSettings:
        if self.ask_threshold > self.reinforce_threshold:
            raise ValueError("ask_threshold must not be above reinforce_threshold")
        return self


class LimitsSettings(Section):
    """Limits that protect the service (docs/operations.md, "Dead letters and limits";
    docs/architecture.md, "Operations")."""

    max_turn_chars: int = Field(default=MAX_CONTENT_CHARS, ge=1, le=MAX_CONTENT_CHARS)
    """Characters per turn: the SDK refuses a longer message, the window dead-letters a longer
    turn from any other producer. At most the event schema's own limit (32,000)."""
    max_memories_per_extraction: int = Field(default=DEFAULT_MAX_MEMORIES, ge=1, le=1_000)
    """Memories one LLM answer may carry; more is an invalid answer (retried, then the snapshot
    is dead-lettered)."""
    max_llm_answer_bytes: int = Field(default=DEFAULT_MAX_ANSWER_BYTES, ge=1_000, le=10_000_000)
    """Bytes of an extraction answer that are parsed; a longer answer is an invalid answer."""
    extraction_turns_per_call: int | None = Field(default=None, ge=2, le=1_000)
    """At most this many turns of a snapshot in one semantic extraction call (None: the whole
    snapshot): more calls and facts from a small model, not (yet) better answers
    (`handlers.extraction.base.snapshot_parts`; BENCHMARKS.md, "LoCoMo")."""


class HttpSettings(Section):
    """The HTTP API and MCP server (`memstream serve`; `memstream up` with a port)."""

    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=0, le=65535)
    """`memstream up` serves the API on this port when set (0: a free port); `serve` defaults
    to 8080."""
    max_body_bytes: int = Field(default=MAX_EVENT_BYTES, ge=1024, le=64 * MAX_EVENT_BYTES)
    """Requests with a larger body are refused (413) before they are read."""


class OperationsSettings(Section):
    """How a worker is watched and stopped (docs/operations.md, "Metrics, probes and draining")."""

    metrics: bool = True
    """Whether the processes count anything (`MEMSTREAM_METRICS=off`: every metric a no-op;
    `streams.metrics` reads the variable itself, at import)."""
    metrics_port: int | None = Field(default=None, ge=0, le=65_535)
    """The port of a worker's `/metrics`, `/healthz` and `/readyz` (0: any free port; unset:
    none). `memstream up` gives each of its workers one of its own."""
    metrics_host: str = "127.0.0.1"
    """Where that server listens (`0.0.0.0` in a container, for Prometheus and the probes)."""
    drain_seconds: float = Field(default=20.0, ge=0, le=600)
    """On SIGTERM, how long a memory type's worker lets the records in flight (LLM calls)
    finish before it abandons the rest (not committed: they come again)."""
