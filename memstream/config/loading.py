"""Configuration: `project-config.yaml`, then environment variables, validated up front.

Every setting has a default that runs the embedded pipeline; `MEMSTREAM_CONFIG` names another file.
Environment variables (they win over the file):

| variable | setting |
| --- | --- |
| KAFKA_BOOTSTRAP_SERVERS | kafka.bootstrap_servers (unset: embedded broker) |
| MONGODB_URI, MONGODB_DATABASE | mongodb.uri (unset: embedded server), mongodb.database |
| OPENAI_BASE_URL, OPENAI_API_KEY, MEMSTREAM_LLM_MODEL | llm.base_url, llm.api_key, llm.model |
| MEMSTREAM_LOCAL_LLM (auto, small, large, off) | llm.local (used when no endpoint is set) |
| MEMSTREAM_LOCAL_LLM_REPEATABLE (true, false) | llm.local_repeatable |
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
| MEMSTREAM_RERANK_PAST_MESSAGES (true, false) | memory.rerank_past_messages |
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from memstream.config.sections import SettingProblem
from memstream.config.settings import Settings


class ConfigError(ValueError):
    """The configuration is invalid; the message lists every problem and where it came from."""


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
    "MEMSTREAM_LOCAL_LLM_REPEATABLE": ("llm", "local_repeatable"),
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
    "MEMSTREAM_RERANK_PAST_MESSAGES": ("memory", "rerank_past_messages"),
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
