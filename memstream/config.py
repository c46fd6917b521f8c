"""Configuration: `project-config.yaml`, then environment variables, validated up front.

Every setting has a default that runs the embedded pipeline; `MEMSTREAM_CONFIG` names another file.
Environment variables (they win over the file):

| variable | setting |
| --- | --- |
| KAFKA_BOOTSTRAP_SERVERS | kafka.bootstrap_servers (unset: embedded broker) |
| MONGODB_URI, MONGODB_DATABASE | mongodb.uri (unset: embedded server), mongodb.database |
| OPENAI_BASE_URL, OPENAI_API_KEY, MEMSTREAM_LLM_MODEL | llm.base_url, llm.api_key, llm.model |
| MEMSTREAM_LOCAL_LLM (auto, small, large, off) | llm.local (used when no endpoint is set) |
| MEMSTREAM_EXTRACTOR | extractor (a name under extractors; memstream.extractors) |
| MEMSTREAM_LLM_TEMPERATURE | llm.temperature |
| MEMSTREAM_LLM_MAX_IN_FLIGHT | llm.max_in_flight (LLM calls in flight per worker) |
| MEMSTREAM_LLM_DAILY_TOKEN_BUDGET | llm.daily_token_budget (per user, extraction) |
| MEMSTREAM_LLM_BUDGET_CHECK_INTERVAL | llm.budget_check_seconds |
| MEMSTREAM_EMBEDDING_PROVIDER, MEMSTREAM_EMBEDDING_MODEL | embedding.provider, embedding.model |
| MEMSTREAM_EMBEDDING_BASE_URL | embedding.base_url (defaults to llm.base_url) |
| MEMSTREAM_MAX_MESSAGES | window.max_messages |
| MEMSTREAM_WINDOW_MAX_TOKENS | window.max_tokens (estimated tokens per snapshot; unset: none) |
| MEMSTREAM_TOPIC_SHIFT_THRESHOLD, MEMSTREAM_TOPIC_SHIFT_MIN_TURNS | window.topic_shift_* |
| MEMSTREAM_IDLE_TIMEOUT | window.idle_timeout_seconds |
| MEMSTREAM_DEDUP_HORIZON | window.dedup_horizon_seconds |
| MEMSTREAM_ENABLED_EXTRACTIONS (alias MONGOMEM_ENABLED_EXTRACTIONS) | memory.extraction.enabled |
| MEMSTREAM_REINFORCE_THRESHOLD, MEMSTREAM_ASK_THRESHOLD | memory.reconcile.* |
| MEMSTREAM_CONSOLIDATE_THRESHOLD | memory.reconcile.consolidate_threshold |
| MEMSTREAM_RECONCILE_QUESTIONS_PER_CALL | memory.reconcile.questions_per_call |
| MEMSTREAM_RETENTION (`type=seconds,…`) | memory.retention_seconds |
| MEMSTREAM_EXPIRY_CHECK_INTERVAL | memory.expiry_check_interval_seconds |
| MEMSTREAM_SEAL_CONTENT (true, false) | memory.seal_content (needs MongoDB for the keys) |
| MEMSTREAM_MASTER_KEY_FILE | memory.master_key_file (wraps the data keys) |
| MEMSTREAM_TOPIC_PREFIX, MEMSTREAM_PARTITIONS | kafka.topic_prefix, kafka.partitions |
| MEMSTREAM_SESSION_TIMEOUT, MEMSTREAM_HEARTBEAT_INTERVAL | kafka.session_timeout_seconds, … |
| MEMSTREAM_PRODUCER_MAX_BATCH_SIZE | kafka.producer_max_batch_size (1 on Tansu) |
| MEMSTREAM_IDEMPOTENT_PRODUCER (auto, on, off) | kafka.idempotent_producer (the SDK's producer) |
| MEMSTREAM_PRODUCER_REQUEST_TIMEOUT | kafka.producer_request_timeout_seconds (stage sends) |
| KAFKA_SECURITY_PROTOCOL, KAFKA_SASL_MECHANISM | kafka.security_protocol, kafka.sasl_mechanism |
| KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD | kafka.sasl_username, kafka.sasl_password |
| KAFKA_SASL_OAUTH_TOKEN_FILE | kafka.sasl_oauth_token_file (OAUTHBEARER) |
| KAFKA_SSL_CAFILE, KAFKA_SSL_CERTFILE, KAFKA_SSL_KEYFILE | kafka.ssl_cafile, ssl_certfile, … |
| KAFKA_SSL_KEY_PASSWORD, KAFKA_SSL_CHECK_HOSTNAME | kafka.ssl_key_password, … |
| MEMSTREAM_MAX_SNAPSHOT_BYTES | window.max_snapshot_bytes |
| MEMSTREAM_MAX_TURN_CHARS | limits.max_turn_chars (SDK refusal, window dead letter) |
| MEMSTREAM_MAX_MEMORIES_PER_EXTRACTION | limits.max_memories_per_extraction |
| MEMSTREAM_EXTRACTION_TURNS_PER_CALL | limits.extraction_turns_per_call |
| MEMSTREAM_MAX_LLM_ANSWER_BYTES | limits.max_llm_answer_bytes |
| MEMSTREAM_HTTP_HOST, MEMSTREAM_HTTP_PORT | http.host, http.port (`up` serves the API when set) |
| MEMSTREAM_HTTP_MAX_BODY_BYTES | http.max_body_bytes |
| MEMSTREAM_METRICS (on, off), MEMSTREAM_METRICS_PORT, … | operations.metrics, metrics_port |
| MEMSTREAM_METRICS_HOST | operations.metrics_host |
| MEMSTREAM_DRAIN_SECONDS | operations.drain_seconds (SIGTERM: records in flight finish) |
| MEMSTREAM_DATA_DIR | data_dir |
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from events.base import UtcDatetime
from events.codec import MAX_EVENT_BYTES
from events.memories import MEMORY_TYPES, MemoryType
from events.topics import Topics
from events.turns import MAX_CONTENT_CHARS
from handlers.extraction.base import DEFAULT_MAX_ANSWER_BYTES, DEFAULT_MAX_MEMORIES
from handlers.extraction.custom import MAX_CUSTOM_TYPES, CustomTypeDeclaration
from handlers.window import (
    DEFAULT_DEDUP_HORIZON,
    DEFAULT_MAX_SNAPSHOT_BYTES,
    SNAPSHOT_ENVELOPE_BYTES,
)
from memstream.extractors import (
    DEFAULT_EXTRACTOR,
    ExtractorSettings,
    apply_extractor,
    extractor_digest,
    memory_types_named,
)
from streams.kafka_security import KafkaSecurity, SaslMechanism, SecurityProtocol


class ConfigError(ValueError):
    """The configuration is invalid; the message lists every problem and where it came from."""


class SettingProblem(ValueError):
    """A problem a section's validator finds with one of its settings, located by `path` (so
    the message names the setting and its environment variable, as a field's own error does)."""

    def __init__(self, path: tuple[str, ...], message: str, value: Any) -> None:
        super().__init__(message)
        self.path = path
        self.value = value


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSettings(_Section):
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


class MongoSettings(_Section):
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


class LLMSettings(_Section):
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

    @property
    def configured(self) -> bool:
        return bool(self.base_url or self.api_key)

    def missing(self) -> list[str]:
        """What must still be set before a remote LLM can be used (empty when ready)."""
        if not self.configured:
            return ["OPENAI_BASE_URL (or OPENAI_API_KEY for api.openai.com)"]
        return [] if self.model else ["MEMSTREAM_LLM_MODEL (the chat model's name)"]


class EmbeddingSettings(_Section):
    provider: Literal["local", "openai"] = "local"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None


class WindowSettings(_Section):
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


class ExtractionSettings(_Section):
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


class ReconcileSettings(_Section):
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


class LimitsSettings(_Section):
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


class HttpSettings(_Section):
    """The HTTP API and MCP server (`memstream serve`; `memstream up` with a port)."""

    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=0, le=65535)
    """`memstream up` serves the API on this port when set (0: a free port); `serve` defaults
    to 8080."""
    max_body_bytes: int = Field(default=MAX_EVENT_BYTES, ge=1024, le=64 * MAX_EVENT_BYTES)
    """Requests with a larger body are refused (413) before they are read."""


class MemorySettings(_Section):
    custom_types: dict[MemoryType, CustomTypeDeclaration] = Field(
        default_factory=dict, max_length=MAX_CUSTOM_TYPES
    )
    """A project's own memory types (`handlers.extraction.custom`, docs/architecture.md,
    "Custom memory types"): each is extracted, reconciled, searched and forgotten like a
    built-in type once `extraction.enabled` names it."""
    extraction: ExtractionSettings = ExtractionSettings()
    reconcile: ReconcileSettings = ReconcileSettings()
    retention_seconds: dict[MemoryType, float] = Field(default_factory=dict)
    """How long a memory version of each type lives before it expires and is forgotten
    (docs/architecture.md, "Expiry"); a type not named lives for ever. In the environment:
    `MEMSTREAM_RETENTION="episodic=7776000,procedural=31536000"`."""
    expiry_check_interval_seconds: float = Field(default=60.0, gt=0)
    """How often each memory type's stage looks for versions that are due."""
    seal_content: bool = True
    """Whether memstream's writers (the SDK, the HTTP API, the window, the extraction stages)
    seal the content of what they write to the log with per-session, per-memory and per-user
    data keys kept in MongoDB, so forgetting can destroy the keys (docs/architecture.md,
    "Crypto-shredding"). Sealed content is read whatever this says."""
    master_key_file: Path | None = None
    """The master keys that wrap the data keys (`memstream.keystore.wrapping`: one base64 key per
    line, the first wraps): the database then holds no usable key material. Unset: the data
    directory's `master.key` when it exists (`memstream up` creates it), else data keys are
    stored unwrapped."""

    @field_validator("retention_seconds", mode="before")
    @classmethod
    def _pairs(cls, value: Any) -> Any:
        if isinstance(value, str):
            pairs = [part.strip() for part in value.split(",") if part.strip()]
            parsed: dict[str, str] = {}
            for pair in pairs:
                name, separator, seconds = pair.partition("=")
                if not separator:
                    raise ValueError(f"retention {pair!r} is not TYPE=SECONDS")
                parsed[name.strip()] = seconds.strip()
            return parsed
        return value

    @field_validator("retention_seconds")
    @classmethod
    def _positive(cls, value: dict[MemoryType, float]) -> dict[MemoryType, float]:
        for name, seconds in value.items():
            if seconds <= 0:
                raise ValueError(f"retention of {name} must be more than 0 seconds")
        return value

    @field_validator("custom_types")
    @classmethod
    def _own_names(
        cls, value: dict[MemoryType, CustomTypeDeclaration]
    ) -> dict[MemoryType, CustomTypeDeclaration]:
        for name in value:
            if name in MEMORY_TYPES:
                raise ValueError(
                    f"{name!r} is a built-in memory type: a custom type needs its own name"
                )
        return value

    @model_validator(mode="after")
    def _known_types(self) -> MemorySettings:
        named: list[tuple[tuple[str, ...], Sequence[str]]] = [
            (("memory", "extraction", "enabled"), self.extraction.enabled),
            (("memory", "retention_seconds"), list(self.retention_seconds)),
        ]
        for path, names in named:
            unknown = [name for name in names if name not in self.types]
            if unknown:
                raise SettingProblem(
                    path,
                    f"unknown memory type {', '.join(map(repr, unknown))}; the memory types are "
                    f"{', '.join(self.types)} (a custom type is declared under "
                    "memory.custom_types)",
                    unknown[0],
                )
        return self

    @property
    def types(self) -> tuple[MemoryType, ...]:
        """Every memory type: the built-in ones, then the declared custom ones."""
        return (*MEMORY_TYPES, *self.custom_types)


class OperationsSettings(_Section):
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


class Settings(_Section):
    """All of memstream's settings."""

    kafka: KafkaSettings = KafkaSettings()
    mongodb: MongoSettings = MongoSettings()
    llm: LLMSettings = LLMSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    window: WindowSettings = WindowSettings()
    memory: MemorySettings = MemorySettings()
    limits: LimitsSettings = LimitsSettings()
    http: HttpSettings = HttpSettings()
    operations: OperationsSettings = OperationsSettings()
    data_dir: Path = Path(".memstream")
    extractor: str = DEFAULT_EXTRACTOR
    """The named extractor in use (`memstream.extractors`); its fields are applied above."""
    extractors: dict[str, ExtractorSettings] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _apply_extractor(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        return apply_extractor(raw, lambda: _prompt_versions(raw))


def _prompt_versions(raw: Mapping[str, Any]) -> dict[str, str]:
    """The code's prompt version per memory type, and each well-formed custom declaration's in
    `raw` (imports the extractors: asked only to check a pin, so a window worker's settings do
    not load them). A bad declaration is left out here: its own validation names the problem."""
    from handlers.extraction.custom import custom_prompt_version
    from handlers.extraction.registry import EXTRACTORS

    versions = {name: make().prompt_version for name, make in EXTRACTORS.items()}
    memory = raw.get("memory")
    declared = memory.get("custom_types") if isinstance(memory, dict) else None
    for name, value in (declared if isinstance(declared, dict) else {}).items():
        try:
            declaration = CustomTypeDeclaration.model_validate(value)
        except ValidationError:
            continue
        versions[str(name)] = custom_prompt_version(str(name), declaration)
    return versions


@dataclass(frozen=True)
class ExtractorIdentity:
    """What a memory's provenance records of the extractor that produced it."""

    name: str
    digest: str
    """Of everything the name stood for when it ran (`memstream.extractors.extractor_digest`)."""


def extractor_identity(settings: Settings) -> ExtractorIdentity:
    """The extractor in use: its name, and a digest of the settings it decides with (not of
    addresses or keys: the same extractor on another endpoint is the same extractor)."""
    from handlers import consolidation_prompt
    from handlers.extraction.registry import extractor_for
    from handlers.reconcile_prompt import BATCH_PROMPT_VERSION, PROMPT_VERSION

    reconcile = settings.memory.reconcile
    enabled = settings.memory.extraction.enabled
    decides = {
        "llm_model": settings.llm.model,
        "temperature": settings.llm.temperature,
        "max_answer_tokens": settings.llm.max_tokens,
        "prompt_versions": {
            name: extractor_for(name, settings.memory.custom_types).prompt_version
            for name in enabled
        },
        "turns_per_call": settings.limits.extraction_turns_per_call,
        "max_memories_per_extraction": settings.limits.max_memories_per_extraction,
        "reconcile": reconcile.model_dump(mode="json"),
        "reconcile_prompt": PROMPT_VERSION
        if reconcile.questions_per_call == 1
        else BATCH_PROMPT_VERSION,
        "consolidate_prompt": consolidation_prompt.PROMPT_VERSION,
    }
    return ExtractorIdentity(settings.extractor, extractor_digest(decides))


_ENVIRONMENT: dict[str, tuple[str, ...]] = {
    "KAFKA_BOOTSTRAP_SERVERS": ("kafka", "bootstrap_servers"),
    "MEMSTREAM_TOPIC_PREFIX": ("kafka", "topic_prefix"),
    "MEMSTREAM_RESULTS_TOPIC_PREFIX": ("kafka", "results_topic_prefix"),
    "MEMSTREAM_PARTITIONS": ("kafka", "partitions"),
    "MEMSTREAM_GROUP_PREFIX": ("kafka", "group_prefix"),
    "MEMSTREAM_SESSION_TIMEOUT": ("kafka", "session_timeout_seconds"),
    "MEMSTREAM_HEARTBEAT_INTERVAL": ("kafka", "heartbeat_interval_seconds"),
    "MEMSTREAM_PRODUCER_MAX_BATCH_SIZE": ("kafka", "producer_max_batch_size"),
    "MEMSTREAM_IDEMPOTENT_PRODUCER": ("kafka", "idempotent_producer"),
    "MEMSTREAM_PRODUCER_REQUEST_TIMEOUT": ("kafka", "producer_request_timeout_seconds"),
    "KAFKA_SECURITY_PROTOCOL": ("kafka", "security_protocol"),
    "KAFKA_SASL_MECHANISM": ("kafka", "sasl_mechanism"),
    "KAFKA_SASL_USERNAME": ("kafka", "sasl_username"),
    "KAFKA_SASL_PASSWORD": ("kafka", "sasl_password"),
    "KAFKA_SASL_OAUTH_TOKEN_FILE": ("kafka", "sasl_oauth_token_file"),
    "KAFKA_SSL_CAFILE": ("kafka", "ssl_cafile"),
    "KAFKA_SSL_CERTFILE": ("kafka", "ssl_certfile"),
    "KAFKA_SSL_KEYFILE": ("kafka", "ssl_keyfile"),
    "KAFKA_SSL_KEY_PASSWORD": ("kafka", "ssl_key_password"),
    "KAFKA_SSL_CHECK_HOSTNAME": ("kafka", "ssl_check_hostname"),
    "MONGODB_URI": ("mongodb", "uri"),
    "MONGODB_DATABASE": ("mongodb", "database"),
    "MEMSTREAM_KEYS_DATABASE": ("mongodb", "keys_database"),
    "OPENAI_BASE_URL": ("llm", "base_url"),
    "OPENAI_API_KEY": ("llm", "api_key"),
    "MEMSTREAM_LLM_MODEL": ("llm", "model"),
    "MEMSTREAM_LOCAL_LLM": ("llm", "local"),
    "MEMSTREAM_LLM_TIMEOUT": ("llm", "timeout_seconds"),
    "MEMSTREAM_LLM_TEMPERATURE": ("llm", "temperature"),
    "MEMSTREAM_LLM_MAX_IN_FLIGHT": ("llm", "max_in_flight"),
    "MEMSTREAM_LLM_DAILY_TOKEN_BUDGET": ("llm", "daily_token_budget"),
    "MEMSTREAM_LLM_BUDGET_CHECK_INTERVAL": ("llm", "budget_check_seconds"),
    "MEMSTREAM_EMBEDDING_PROVIDER": ("embedding", "provider"),
    "MEMSTREAM_EMBEDDING_MODEL": ("embedding", "model"),
    "MEMSTREAM_EMBEDDING_BASE_URL": ("embedding", "base_url"),
    "MEMSTREAM_MAX_MESSAGES": ("window", "max_messages"),
    "MEMSTREAM_WINDOW_MAX_TOKENS": ("window", "max_tokens"),
    "MEMSTREAM_TOPIC_SHIFT_THRESHOLD": ("window", "topic_shift_threshold"),
    "MEMSTREAM_TOPIC_SHIFT_MIN_TURNS": ("window", "topic_shift_min_turns"),
    "MEMSTREAM_IDLE_TIMEOUT": ("window", "idle_timeout_seconds"),
    "MEMSTREAM_IDLE_CHECK_INTERVAL": ("window", "idle_check_interval_seconds"),
    "MEMSTREAM_DEDUP_HORIZON": ("window", "dedup_horizon_seconds"),
    "MEMSTREAM_MAX_SNAPSHOT_BYTES": ("window", "max_snapshot_bytes"),
    "MEMSTREAM_MAX_TURN_CHARS": ("limits", "max_turn_chars"),
    "MEMSTREAM_MAX_MEMORIES_PER_EXTRACTION": ("limits", "max_memories_per_extraction"),
    "MEMSTREAM_EXTRACTION_TURNS_PER_CALL": ("limits", "extraction_turns_per_call"),
    "MEMSTREAM_MAX_LLM_ANSWER_BYTES": ("limits", "max_llm_answer_bytes"),
    "MONGOMEM_ENABLED_EXTRACTIONS": ("memory", "extraction", "enabled"),
    "MEMSTREAM_ENABLED_EXTRACTIONS": ("memory", "extraction", "enabled"),
    "MEMSTREAM_EXTRACT_ONLY_USERS": ("memory", "extraction", "only_users"),
    "MEMSTREAM_EXTRACT_SINCE": ("memory", "extraction", "since"),
    "MEMSTREAM_REINFORCE_THRESHOLD": ("memory", "reconcile", "reinforce_threshold"),
    "MEMSTREAM_ASK_THRESHOLD": ("memory", "reconcile", "ask_threshold"),
    "MEMSTREAM_CONSOLIDATE_THRESHOLD": ("memory", "reconcile", "consolidate_threshold"),
    "MEMSTREAM_RECONCILE_QUESTIONS_PER_CALL": ("memory", "reconcile", "questions_per_call"),
    "MEMSTREAM_RETENTION": ("memory", "retention_seconds"),
    "MEMSTREAM_EXPIRY_CHECK_INTERVAL": ("memory", "expiry_check_interval_seconds"),
    "MEMSTREAM_SEAL_CONTENT": ("memory", "seal_content"),
    "MEMSTREAM_MASTER_KEY_FILE": ("memory", "master_key_file"),
    "MEMSTREAM_HTTP_HOST": ("http", "host"),
    "MEMSTREAM_HTTP_PORT": ("http", "port"),
    "MEMSTREAM_HTTP_MAX_BODY_BYTES": ("http", "max_body_bytes"),
    "MEMSTREAM_METRICS": ("operations", "metrics"),
    "MEMSTREAM_METRICS_PORT": ("operations", "metrics_port"),
    "MEMSTREAM_METRICS_HOST": ("operations", "metrics_host"),
    "MEMSTREAM_DRAIN_SECONDS": ("operations", "drain_seconds"),
    "MEMSTREAM_DATA_DIR": ("data_dir",),
    "MEMSTREAM_EXTRACTOR": ("extractor",),
}
"""Environment variable -> setting path. Later entries win (MEMSTREAM_ over the MONGOMEM_ alias)."""

DEFAULT_CONFIG_FILE = "project-config.yaml"


def load_settings(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Read the config file (if it exists), apply the environment, validate everything."""
    environ = os.environ if environ is None else environ
    explicit = path is not None or bool(environ.get("MEMSTREAM_CONFIG"))
    path = path or Path(environ.get("MEMSTREAM_CONFIG") or DEFAULT_CONFIG_FILE)
    if explicit and not path.exists():
        raise ConfigError(f"configuration file {path} does not exist (MEMSTREAM_CONFIG)")
    raw = _read_yaml(path)
    for variable, setting in _ENVIRONMENT.items():
        value = environ.get(variable)
        if value not in (None, ""):
            _assign(raw, setting, value)
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, path, environ)) from exc


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping, got {type(data).__name__}")
    return data


def _assign(raw: dict[str, Any], setting: tuple[str, ...], value: str) -> None:
    node = raw
    for part in setting[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[setting[-1]] = value


def _describe(exc: ValidationError, path: Path, environ: Mapping[str, str]) -> str:
    variables = {setting: name for name, setting in _ENVIRONMENT.items()}
    variables.update({setting: name for name, setting in _ENVIRONMENT.items() if environ.get(name)})
    lines = [f"invalid configuration ({path} and environment):"]
    for error in exc.errors():
        location = tuple(str(part) for part in error["loc"])
        value = error.get("input")
        problem = (error.get("ctx") or {}).get("error")
        if isinstance(problem, SettingProblem):
            location, value = problem.path, problem.value
        where = ".".join(location)
        variable = variables.get(location[:3]) or variables.get(location[:2])
        hint = f" (environment variable {variable} if set)" if variable else ""
        lines.append(f"  {where}: {error['msg']} (got {value!r}){hint}")
    return "\n".join(lines)
