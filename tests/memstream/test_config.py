"""Configuration: defaults, project-config.yaml, environment overrides, clear errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memstream.config import (
    DEFAULT_CONFIG_FILE,
    ConfigError,
    LLMSettings,
    Settings,
    load_settings,
)

FILE = """\
kafka:
  bootstrap_servers: broker:9092
  topic_prefix: test.
  partitions: 8
mongodb:
  uri: mongodb://db:27017
  database: memtest
llm:
  base_url: http://llm:8000/v1
  model: file-model
window:
  max_messages: 12
  idle_timeout_seconds: 90
memory:
  extraction:
    enabled: [semantic, episodic]
data_dir: /var/lib/memstream
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "project-config.yaml"
    path.write_text(FILE, encoding="utf-8")
    return path


def load(path: Path | None = None, /, **environ: str) -> Settings:
    return load_settings(path or Path("/dev/null"), environ)  # an empty file: no settings


def error_of(path: Path | None = None, /, **environ: str) -> str:
    with pytest.raises(ConfigError) as info:
        load(path, **environ)
    return str(info.value)


# --- defaults -------------------------------------------------------------------------------------


def test_defaults_run_the_embedded_pipeline() -> None:
    settings = load()
    assert settings == Settings()
    assert settings.kafka.bootstrap_servers is None
    assert settings.mongodb.uri is None
    assert settings.mongodb.database == "memstream"
    assert settings.kafka.topic_prefix == "memstream."
    assert settings.kafka.topics.turns == "memstream.turns"
    assert settings.kafka.partitions == 16
    assert settings.llm.base_url is None
    assert not settings.llm.configured
    assert settings.embedding.provider == "local"
    assert settings.window.max_messages == 20
    assert settings.window.idle_timeout_seconds == 300.0
    assert settings.window.max_tokens is None
    assert settings.window.topic_shift_threshold is None
    assert settings.memory.extraction.enabled == ("semantic", "episodic", "procedural", "taxonomic")
    assert settings.data_dir == Path(".memstream")


def test_empty_file_gives_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing here\n", encoding="utf-8")
    assert load(path) == Settings()


def test_default_file_is_found_through_memstream_config(config_file: Path) -> None:
    settings = load_settings(environ={"MEMSTREAM_CONFIG": str(config_file)})
    assert settings.window.max_messages == 12
    assert DEFAULT_CONFIG_FILE == "project-config.yaml"


def test_default_file_is_project_config_in_the_working_directory(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(config_file.parent)
    assert load_settings(environ={}).window.max_messages == 12


# --- file and environment -------------------------------------------------------------------------


def test_file_values_are_read(config_file: Path) -> None:
    settings = load(config_file)
    assert settings.kafka.bootstrap_servers == "broker:9092"
    assert settings.kafka.topics.snapshots == "test.snapshots"
    assert settings.kafka.partitions == 8
    assert settings.mongodb.uri == "mongodb://db:27017"
    assert settings.mongodb.database == "memtest"
    assert settings.llm.base_url == "http://llm:8000/v1"
    assert settings.llm.model == "file-model"
    assert settings.window.max_messages == 12
    assert settings.window.idle_timeout_seconds == 90.0
    assert settings.memory.extraction.enabled == ("semantic", "episodic")
    assert settings.data_dir == Path("/var/lib/memstream")


@pytest.mark.parametrize(
    ("variable", "value", "read"),
    [
        ("KAFKA_BOOTSTRAP_SERVERS", "k1:9092,k2:9092", lambda s: s.kafka.bootstrap_servers),
        ("MEMSTREAM_TOPIC_PREFIX", "env.", lambda s: s.kafka.topic_prefix),
        ("MEMSTREAM_PARTITIONS", "16", lambda s: s.kafka.partitions),
        ("MONGODB_URI", "mongodb://env:27017", lambda s: s.mongodb.uri),
        ("MONGODB_DATABASE", "envdb", lambda s: s.mongodb.database),
        ("OPENAI_BASE_URL", "http://env/v1", lambda s: s.llm.base_url),
        ("MEMSTREAM_LLM_MODEL", "env-model", lambda s: s.llm.model),
        ("MEMSTREAM_MAX_MESSAGES", "5", lambda s: s.window.max_messages),
        ("MEMSTREAM_WINDOW_MAX_TOKENS", "4000", lambda s: s.window.max_tokens),
        ("MEMSTREAM_TOPIC_SHIFT_THRESHOLD", "0.25", lambda s: s.window.topic_shift_threshold),
        ("MEMSTREAM_TOPIC_SHIFT_MIN_TURNS", "7", lambda s: s.window.topic_shift_min_turns),
        ("MEMSTREAM_IDLE_TIMEOUT", "2.5", lambda s: s.window.idle_timeout_seconds),
        ("MEMSTREAM_DATA_DIR", "/tmp/m", lambda s: s.data_dir),
        ("MEMSTREAM_MAX_TURN_CHARS", "2000", lambda s: s.limits.max_turn_chars),
        (
            "MEMSTREAM_MAX_MEMORIES_PER_EXTRACTION",
            "7",
            lambda s: s.limits.max_memories_per_extraction,
        ),
        ("MEMSTREAM_MAX_LLM_ANSWER_BYTES", "5000", lambda s: s.limits.max_llm_answer_bytes),
    ],
)
def test_environment_wins_over_the_file(
    config_file: Path, variable: str, value: str, read: Callable[[Settings], object]
) -> None:
    from_file = read(load(config_file))
    from_env = read(load(config_file, **{variable: value}))
    assert from_env != from_file
    numbers = {"16": 16, "5": 5, "2.5": 2.5, "2000": 2000, "4000": 4000, "7": 7, "5000": 5000}
    numbers["0.25"] = 0.25
    expected = {**numbers, "/tmp/m": Path("/tmp/m")}.get(value, value)
    assert from_env == expected


def test_environment_without_a_file(tmp_path: Path) -> None:
    settings = load(OPENAI_API_KEY="sk-test", MEMSTREAM_PARTITIONS="2")
    assert settings.llm.api_key == "sk-test"
    assert settings.llm.configured
    assert settings.kafka.partitions == 2


def test_empty_environment_values_are_ignored(config_file: Path) -> None:
    settings = load(config_file, MEMSTREAM_MAX_MESSAGES="", KAFKA_BOOTSTRAP_SERVERS="")
    assert settings.window.max_messages == 12
    assert settings.kafka.bootstrap_servers == "broker:9092"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("semantic", ("semantic",)),
        ("semantic,episodic", ("semantic", "episodic")),
        (" procedural , taxonomic ,", ("procedural", "taxonomic")),
        ("semantic,semantic,episodic", ("semantic", "episodic")),
        (
            "semantic,episodic,procedural,taxonomic",
            ("semantic", "episodic", "procedural", "taxonomic"),
        ),
    ],
)
def test_enabled_extractions_comma_list(value: str, expected: tuple[str, ...]) -> None:
    assert load(MEMSTREAM_ENABLED_EXTRACTIONS=value).memory.extraction.enabled == expected


def test_enabled_extractions_environment_wins_over_the_file(config_file: Path) -> None:
    settings = load(config_file, MEMSTREAM_ENABLED_EXTRACTIONS="taxonomic")
    assert settings.memory.extraction.enabled == ("taxonomic",)


def test_mongomem_alias_is_accepted(config_file: Path) -> None:
    settings = load(config_file, MONGOMEM_ENABLED_EXTRACTIONS="procedural,semantic")
    assert settings.memory.extraction.enabled == ("procedural", "semantic")


def test_memstream_variable_wins_over_the_mongomem_alias() -> None:
    settings = load(
        MONGOMEM_ENABLED_EXTRACTIONS="procedural", MEMSTREAM_ENABLED_EXTRACTIONS="episodic"
    )
    assert settings.memory.extraction.enabled == ("episodic",)


def test_enabled_extractions_as_a_comma_string_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("memory:\n  extraction:\n    enabled: semantic, taxonomic\n", encoding="utf-8")
    assert load(path).memory.extraction.enabled == ("semantic", "taxonomic")


def test_environment_fills_a_section_the_file_leaves_null(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("window:\n", encoding="utf-8")
    assert load(path, MEMSTREAM_MAX_MESSAGES="7").window.max_messages == 7


# --- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "setting"),
    [
        ("MEMSTREAM_MAX_MESSAGES", "many", "window.max_messages"),
        ("MEMSTREAM_MAX_MESSAGES", "0", "window.max_messages"),
        ("MEMSTREAM_WINDOW_MAX_TOKENS", "10", "window.max_tokens"),
        ("MEMSTREAM_TOPIC_SHIFT_THRESHOLD", "1.5", "window.topic_shift_threshold"),
        ("MEMSTREAM_IDLE_TIMEOUT", "-1", "window.idle_timeout_seconds"),
        ("MEMSTREAM_PARTITIONS", "0", "kafka.partitions"),
        ("MEMSTREAM_TOPIC_PREFIX", "bad prefix", "kafka.topic_prefix"),
        ("MEMSTREAM_EMBEDDING_PROVIDER", "cohere", "embedding.provider"),
        ("MONGODB_DATABASE", "has space", "mongodb.database"),
        ("MEMSTREAM_ENABLED_EXTRACTIONS", "semantic,bogus", "memory.extraction.enabled"),
    ],
)
def test_bad_environment_value_names_the_setting_and_the_variable(
    variable: str, value: str, setting: str
) -> None:
    message = error_of(**{variable: value})
    assert setting in message
    assert variable in message
    assert repr(value.split(",")[-1]) in message  # the offending value (list: the bad item)


def test_bad_file_value_names_the_file_and_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("window:\n  max_messages: lots\n", encoding="utf-8")
    message = error_of(path)
    assert str(path) in message
    assert "window.max_messages" in message
    assert "MEMSTREAM_MAX_MESSAGES" in message


def test_every_problem_is_listed() -> None:
    message = error_of(MEMSTREAM_MAX_MESSAGES="x", MEMSTREAM_PARTITIONS="y")
    assert "window.max_messages" in message
    assert "kafka.partitions" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kafka:\n  bootstrap: x\n", "kafka.bootstrap"),
        ("extras: 1\n", "extras"),
    ],
)
def test_unknown_keys_are_refused(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    message = error_of(path)
    assert expected in message
    assert "Extra inputs are not permitted" in message


def test_invalid_yaml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("kafka: [unclosed\n", encoding="utf-8")
    message = error_of(path)
    assert str(path) in message
    assert "not valid YAML" in message


@pytest.mark.parametrize(("text", "kind"), [("- a\n- b\n", "list"), ("just text\n", "str")])
def test_non_mapping_top_level_is_a_config_error(tmp_path: Path, text: str, kind: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    message = error_of(path)
    assert str(path) in message
    assert f"the top level must be a mapping, got {kind}" in message


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


def test_bad_alias_value_names_the_alias() -> None:
    assert "MONGOMEM_ENABLED_EXTRACTIONS" in error_of(MONGOMEM_ENABLED_EXTRACTIONS="bogus")


# --- LLM settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("llm", "missing"),
    [
        (LLMSettings(), ["OPENAI_BASE_URL"]),
        (LLMSettings(base_url="http://llm/v1"), ["MEMSTREAM_LLM_MODEL"]),
        (LLMSettings(api_key="sk"), ["MEMSTREAM_LLM_MODEL"]),
        (LLMSettings(base_url="http://llm/v1", model="m"), []),
    ],
)
def test_llm_missing(llm: LLMSettings, missing: list[str]) -> None:
    found = llm.missing()
    assert len(found) == len(missing)
    for text, variable in zip(found, missing, strict=True):
        assert variable in text


def test_an_explicit_config_file_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(environ={"MEMSTREAM_CONFIG": str(missing)})


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MEMSTREAM_MAX_TURN_CHARS", "32001"),  # over the event schema's own limit
        ("MEMSTREAM_MAX_MEMORIES_PER_EXTRACTION", "0"),
        ("MEMSTREAM_MAX_LLM_ANSWER_BYTES", "10"),
    ],
)
def test_limits_outside_their_range_are_refused_naming_the_variable(
    variable: str, value: str
) -> None:
    with pytest.raises(ConfigError, match=variable):
        load_settings(environ={variable: value})


async def test_the_sdk_refuses_a_turn_over_the_configured_limit() -> None:
    from handlers.messages import InvalidMessageError
    from memstream.sdk.client import MemoryClient

    client = MemoryClient(load_settings(environ={"MEMSTREAM_MAX_TURN_CHARS": "10"}))
    with pytest.raises(InvalidMessageError, match="over the limit of 10"):
        await client.record("u1", "s1", [{"role": "user", "content": "x" * 11}])


def test_reranking_past_messages_by_meaning_is_off_unless_the_environment_turns_it_on() -> None:
    assert load().memory.rerank_past_messages is False
    assert load(MEMSTREAM_RERANK_PAST_MESSAGES="true").memory.rerank_past_messages is True


def test_retention_per_memory_type_is_read_from_the_environment() -> None:
    settings = load(MEMSTREAM_RETENTION="episodic=3600, procedural=60")
    assert settings.memory.retention_seconds == {"episodic": 3600.0, "procedural": 60.0}
    assert load().memory.retention_seconds == {}


@pytest.mark.parametrize(
    ("value", "problem"),
    [("episodic", "is not TYPE=SECONDS"), ("dreams=10", "dreams"), ("semantic=0", "more than 0")],
)
def test_a_bad_retention_is_refused_with_the_reason(value: str, problem: str) -> None:
    assert problem in error_of(MEMSTREAM_RETENTION=value)
