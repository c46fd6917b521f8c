"""The codec: every event round-trips; bad records are refused with a clear EventDecodeError."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

import events.upcasting as upcasting
from events import (
    EventDecodeError,
    EventTooLarge,
    SnapshotExtracted,
    SnapshotPromoted,
    TurnRecorded,
    decode,
    derived_id,
    encode,
    snapshot_id,
)
from events.codec import EVENT_TYPES, MAX_EVENT_BYTES
from events.schema import export_schemas, json_schemas
from tests import factories as f

SAMPLES = Path(__file__).parent / "samples"
SAMPLE_FILES = sorted(SAMPLES.glob("*.json"))
EVENT_TYPE_NAMES = sorted(model.__name__ for model in EVENT_TYPES)

EXAMPLES: dict[str, Any] = {
    "TurnRecorded": lambda: f.turn(),
    "TurnRecorded/full": lambda: f.turn(
        role="assistant",
        name="John",
        agent_id="agent-1",
        principal=f.principal("service_account", "sa-1"),
        content="line one\nline two: 用户",
    ),
    "TurnRecorded/tool": lambda: f.turn(role="tool", tool_name="search", content='{"hits": 0}'),
    "SessionFlushRequested": lambda: f.flush(),
    "SessionIdled": lambda: f.idle(2),
    "SnapshotExtracted": lambda: f.extracted(f.snapshot(), f.content(), attempts=2),
    "SnapshotExtracted/failure": lambda: f.extracted(
        f.snapshot(), failure="invalid LLM output", attempts=3
    ),
    "MemorySaveRequested": lambda: f.save_request(agent_id="agent-1", session_id="s1"),
    "MemorySaved": lambda: _saved(),
    "MemoryRollbackRequested": lambda: f.rollback_request(
        agent_id="agent-1", principal=f.principal("service_account", "sa-1")
    ),
    "MemoryRolledBack": lambda: _rolled_back(),
    "MemoryRolledBack/refused": lambda: _rolled_back(to_version=9),
    "MemoryConsolidationRequested": lambda: f.consolidation_request(
        principal=f.principal("service_account", "sa-1")
    ),
    "MemoriesConsolidated": lambda: _consolidated(),
    "MemoriesConsolidated/unchanged": lambda: _consolidated(answered=False),
    "SnapshotPromoted": lambda: f.snapshot(
        turns=[f.turn(name="Tim"), f.turn(role="assistant", content="Noted.")], seq=3
    ),
    "MemoryAdded": lambda: f.memory_added(),
    "MemoryUpdated": lambda: f.memory_updated(),
    "MemoryReinforced": lambda: f.memory_reinforced(merged_attributes={"aliases": ["X"]}),
    "InputDeadLettered": lambda: f.dead_letter(),
    "InputDeadLettered/redrive": lambda: f.dead_letter(
        payload_bytes=5, payload_sha256="0" * 64, redrive_id="r1", redrive_of="dead-0001"
    ),
    "DeadLetterRedriven": lambda: f.redrive(),
    "SnapshotExtracted/redrive": lambda: f.extracted(f.snapshot(), f.content(), redrive_id="r1"),
    "MemoryForgotten": lambda: f.memory_forgotten(),
    "SessionForgotten": lambda: f.session_forgotten(),
    "UserForgotten": lambda: f.user_forgotten(turns_partition=1),
    "UserForgotten/saves": lambda: f.user_forgotten(),
    "SessionsForgotten": lambda: _sessions_forgotten(),
    "MemoriesForgotten": lambda: _memories_forgotten(),
    "MemoryExpired": lambda: _memory_expired(),
    "MemoryAdded/expiring": lambda: f.memory_added(expires_at=f.CLOCK),
    "ReadModelSwitched": lambda: _switched(),
    "ReadModelSwitched/back": lambda: _switched(back=True),
}


def _switched(back: bool = False) -> Any:
    from handlers.serving import LIVE, fold, promotion, return_to_replaced

    asked = {"configured_extractor": "default", "requested_by": "cli:ops", "now": f.CLOCK}
    promoted = promotion(LIVE, "memstream_v2", "v2", reason="v2 finds more", **asked)
    return return_to_replaced(fold([promoted]), reason="", **asked) if back else promoted


def _memory_expired() -> Any:
    from handlers.expiry import expiry_command
    from handlers.known_memory import evolve

    (known,) = evolve({}, [f.memory_added(expires_at=f.CLOCK)]).values()
    return expiry_command(known, "semantic")


def _sessions_forgotten() -> Any:
    from handlers.window import sessions_forgotten

    return sessions_forgotten(f.session_forgotten(), ["s1"], 0)


def _memories_forgotten() -> Any:
    from handlers.forgetting import memories_forgotten

    return memories_forgotten(_sessions_forgotten(), "semantic", ["m-1"])


def _saved() -> Any:
    from handlers.extraction.results import save_record

    request = f.save_request()
    return save_record(request, [f.memory_added()], f.LLMUsage())


def _consolidated(answered: bool = True) -> Any:
    from events.memories import LLMUsage
    from handlers.consolidation import ClusterAnswer, Verdict, clusters_of, consolidation_record
    from handlers.known_memory import evolve

    added = [
        f.memory_added(memory_id="m-1", content=f.content(text="The user has a dog named Rex.")),
        f.memory_added(memory_id="m-2", content=f.content(text="The user owns a dog, Rex.")),
    ]
    (cluster,) = clusters_of(evolve({}, added).values(), user_id=f.USER_ID, threshold=0.5)
    verdict = Verdict("merge", survivor=0, text="The user has a dog named Rex.", reason="same dog")
    return consolidation_record(
        f.consolidation_request(event_id="consolidation-0001"),
        "semantic",
        [ClusterAnswer(cluster, verdict if answered else None, asked=answered)],
        vectors={0: (0.6, 0.8)},
        provenance=f.provenance(),
        usage=LLMUsage(calls=1, prompt_tokens=300, completion_tokens=40)
        if answered
        else LLMUsage(),
        prompt_version="consolidate-1",
    )


def _rolled_back(to_version: int = 1) -> Any:
    from handlers.known_memory import evolve
    from handlers.rollback import StoredVersion, rollback_decision, rollback_record

    first = f.memory_added(memory_id="m-1")
    second = f.memory_updated(memory_id="m-1")
    current = evolve(evolve({}, [first]), [second])["m-1"]
    stored = StoredVersion(
        memory_id="m-1",
        version=1,
        user_id=f.USER_ID,
        memory_type="semantic",
        content=first.content,
        embedding=first.embedding,
        embedding_model="test-embedder",
        expires_at=None,
    )
    request = f.rollback_request(to_version=to_version)
    return rollback_record(request, rollback_decision(request, current, [stored], f.provenance()))


def _turn_payload(**changes: Any) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(encode(f.turn()))
    payload.update(changes)
    return payload


def _decode_error(payload: Any) -> str:
    data = payload if isinstance(payload, bytes | str) else orjson.dumps(payload)
    with pytest.raises(EventDecodeError) as info:
        decode(data)
    return str(info.value)


# --- round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_event_round_trips(name: str) -> None:
    event = EXAMPLES[name]()
    data = encode(event)
    assert isinstance(data, bytes)
    assert decode(data) == event
    assert decode(data.decode()) == event
    payload = json.loads(data)
    assert payload["event_type"] == type(event).__name__
    assert payload["schema_version"] == type(event).model_fields["schema_version"].default


def test_examples_cover_every_event_type() -> None:
    covered = {type(make()).__name__ for make in EXAMPLES.values()}
    assert covered == set(EVENT_TYPE_NAMES)


def test_encoding_is_compact_json_with_utc_timestamps() -> None:
    data = encode(f.turn())
    assert b"\n" not in data
    assert json.loads(data)["occurred_at"] == "2026-01-31T12:00:00Z"


def test_non_utc_timestamps_are_normalised_to_utc() -> None:
    payload = _turn_payload(occurred_at="2026-01-31T14:00:00+02:00")
    event = decode(orjson.dumps(payload))
    assert event.occurred_at == f.CLOCK
    assert event.occurred_at.utcoffset() == timedelta(0)


# --- stored samples (schema compatibility) -------------------------------------------------------


def test_there_is_one_sample_per_event_type() -> None:
    assert [path.stem for path in SAMPLE_FILES] == EVENT_TYPE_NAMES


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda path: path.stem)
def test_stored_sample_decodes(path: Path) -> None:
    event = decode(path.read_bytes())
    assert type(event).__name__ == path.stem
    # Re-encoding reproduces the stored payload: no field was renamed, dropped or added.
    assert json.loads(encode(event)) == json.loads(path.read_text(encoding="utf-8"))


# --- refused records -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"{not json", "not JSON"),
        (b"", "not JSON"),
        (b"[1, 2]", "JSON object, got list"),
        (b'"TurnRecorded"', "JSON object, got str"),
        (b"42", "JSON object, got int"),
        (b"null", "JSON object, got NoneType"),
    ],
)
def test_records_that_are_not_json_objects_are_refused(data: bytes, expected: str) -> None:
    assert expected in _decode_error(data)


def test_unknown_event_type_is_refused() -> None:
    message = _decode_error(_turn_payload(event_type="TurnDeleted"))
    assert "TurnDeleted" in message
    assert "TurnRecorded" in message  # the accepted tags are listed


def test_missing_event_type_is_refused() -> None:
    payload = _turn_payload()
    del payload["event_type"]
    assert "event_type" in _decode_error(payload)


@pytest.mark.parametrize("field", ["event_id", "user_id", "session_id", "role", "content"])
def test_missing_field_is_refused_and_named(field: str) -> None:
    payload = _turn_payload()
    del payload[field]
    message = _decode_error(payload)
    assert field in message
    assert "Field required" in message


def test_several_problems_are_summarised() -> None:
    payload = {"event_type": "TurnRecorded", "schema_version": 1}
    message = _decode_error(payload)
    assert message.startswith("invalid event: ")
    assert "more)" in message  # more than five problems: the rest are counted


@pytest.mark.parametrize("field", ["occurred_at", "recorded_at"])
def test_naive_timestamp_is_refused(field: str) -> None:
    message = _decode_error(_turn_payload(**{field: "2026-01-31T12:00:00"}))
    assert field in message
    assert "timezone" in message


def test_extra_field_is_refused() -> None:
    message = _decode_error(_turn_payload(mood="happy"))
    assert "mood" in message
    assert "Extra inputs are not permitted" in message


def test_wrong_schema_version_without_upcaster_is_refused() -> None:
    assert "schema_version" in _decode_error(_turn_payload(schema_version=2))


def test_oversized_record_is_refused_before_parsing() -> None:
    data = b" " * (MAX_EVENT_BYTES + 1)
    message = _decode_error(data)
    assert str(MAX_EVENT_BYTES) in message
    assert "bytes" in message


def test_oversized_content_is_refused() -> None:
    message = _decode_error(_turn_payload(content="x" * 32_001))
    assert "content" in message


@pytest.mark.parametrize("role", ["robot", "User", "", None])
def test_unknown_role_is_refused(role: Any) -> None:
    assert "role" in _decode_error(_turn_payload(role=role))


@pytest.mark.parametrize("name", ["user", "Assistant", " SYSTEM ", "tool"])
def test_name_that_is_a_role_label_is_refused(name: str) -> None:
    assert "role label" in _decode_error(_turn_payload(role="assistant", name=name))


@pytest.mark.parametrize("name", ["[John]", "Jo[hn", "Jo]hn", "John:", "a\nb", ""])
def test_name_with_rendering_characters_is_refused(name: str) -> None:
    assert "name" in _decode_error(_turn_payload(role="assistant", name=name))


def test_tool_turn_with_name_is_refused() -> None:
    message = _decode_error(_turn_payload(role="tool", name="search"))
    assert "tool_name" in message


def test_tool_name_on_a_non_tool_turn_is_refused() -> None:
    message = _decode_error(_turn_payload(role="user", tool_name="search"))
    assert "tool_name is only for role 'tool'" in message


@pytest.mark.parametrize("user_id", ["u|1", "u 1", "u\t1", "u\n1", "", "u\x001"])
def test_user_id_with_separator_whitespace_or_control_is_refused(user_id: str) -> None:
    assert "user_id" in _decode_error(_turn_payload(user_id=user_id))


@pytest.mark.parametrize("session_id", ["s|1", "s 1"])
def test_session_id_with_separator_or_whitespace_is_refused(session_id: str) -> None:
    assert "session_id" in _decode_error(_turn_payload(session_id=session_id))


def test_snapshot_without_turns_is_refused() -> None:
    payload = json.loads(encode(f.snapshot()))
    payload["turns"] = []
    assert "turns" in _decode_error(payload)


def test_memory_added_with_version_2_is_refused() -> None:
    payload = json.loads(encode(f.memory_added()))
    payload["version"] = 2
    assert "version" in _decode_error(payload)


# --- upcasting -----------------------------------------------------------------------------------


def _turn_v0_to_v1(payload: dict[str, Any]) -> dict[str, Any]:
    upgraded = {k: v for k, v in payload.items() if k not in ("text", "speaker")}
    upgraded["content"] = payload["text"]
    if payload.get("speaker"):
        upgraded["name"] = payload["speaker"]
    upgraded.setdefault("recorded_at", payload["occurred_at"])
    upgraded["schema_version"] = 1
    return upgraded


LEGACY_TURN = SAMPLES / "legacy" / "TurnRecorded.v0.json"


def test_stored_v0_sample_is_refused_without_an_upcaster() -> None:
    assert "schema_version" in _decode_error(LEGACY_TURN.read_bytes())


def test_registered_upcaster_lifts_a_stored_v0_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upcasting, "UPCASTERS", {("TurnRecorded", 0): _turn_v0_to_v1})
    event = decode(LEGACY_TURN.read_bytes())
    assert isinstance(event, TurnRecorded)
    assert event.schema_version == 1
    assert event.content == "I live in Lisbon."
    assert event.name == "Tim"
    assert event.recorded_at == event.occurred_at


def test_upcasters_chain_until_the_current_version(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def step(version: int) -> Any:
        def lift(payload: dict[str, Any]) -> dict[str, Any]:
            calls.append(version)
            return {**payload, "schema_version": version + 1}

        return lift

    monkeypatch.setattr(
        upcasting, "UPCASTERS", {("SessionFlushRequested", -5 + i): step(-5 + i) for i in range(6)}
    )
    payload = {**json.loads(encode(f.flush())), "schema_version": -3}
    event = decode(orjson.dumps(payload))
    assert event.schema_version == 1
    assert calls == [-3, -2, -1, 0]


def test_upcasters_only_apply_to_their_event_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upcasting, "UPCASTERS", {("SessionIdled", 0): _turn_v0_to_v1})
    assert "schema_version" in _decode_error(LEGACY_TURN.read_bytes())


def test_a_stored_v1_extraction_record_is_lifted_to_v2_without_decisions() -> None:
    stored = SAMPLES / "legacy" / "SnapshotExtracted.v1.json"
    event = decode(stored.read_bytes())
    assert isinstance(event, SnapshotExtracted)
    assert event.schema_version == 2
    assert event.decisions == () and event.memory_ids == ()  # its MemoryAdded came separately
    assert event.snapshot_id == json.loads(stored.read_text())["snapshot_id"]


@pytest.mark.parametrize("name", ["MemoryAdded", "MemoryUpdated", "MemoryReinforced"])
def test_a_stored_v1_memory_event_is_lifted_to_v2_without_provenance(name: str) -> None:
    event = decode((SAMPLES / "legacy" / f"{name}.v1.json").read_bytes())
    assert type(event).__name__ == name
    assert event.schema_version == 2
    assert event.provenance is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "name", ["InputDeadLettered.v1-before-redrive", "SnapshotExtracted.v2-before-redrive"]
)
def test_records_written_before_redrives_existed_still_decode(name: str) -> None:
    event = decode((SAMPLES / "legacy" / f"{name}.json").read_bytes())
    assert event.redrive_id is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "name",
    ["MemoryAdded", "MemoryUpdated", "SnapshotExtracted", "MemorySaved", "MemorySaveRequested"],
)
def test_records_written_before_expiry_existed_decode_without_one(name: str) -> None:
    event = decode((SAMPLES / "legacy" / f"{name}.before-expiry.json").read_bytes())
    decisions = getattr(event, "decisions", None) or [event]
    assert all(getattr(item, "expires_at", None) is None for item in decisions)


@pytest.mark.parametrize(
    "name",
    [
        "MemoryAdded",
        "MemoryReinforced",
        "MemoryRolledBack",
        "MemorySaved",
        "MemoryUpdated",
        "SnapshotExtracted",
    ],
)
def test_records_written_before_extractors_had_names_decode_without_one(name: str) -> None:
    event = decode((SAMPLES / "legacy" / f"{name}.before-extractor-names.json").read_bytes())
    decisions = getattr(event, "decisions", None) or [getattr(event, "decision", None) or event]
    provenances = [item.provenance for item in decisions if item.provenance is not None]
    assert provenances and all(p.extractor is p.extractor_digest is None for p in provenances)


def test_decisions_nested_in_a_stored_result_are_lifted_too() -> None:
    stored = SAMPLES / "legacy" / "SnapshotExtracted.v2-nested-v1.json"
    event = decode(stored.read_bytes())
    assert isinstance(event, SnapshotExtracted)
    (decision,) = event.decisions
    assert decision.schema_version == 2 and decision.provenance is None


def test_an_extraction_record_refuses_a_decision_about_another_user() -> None:
    payload = json.loads((SAMPLES / "SnapshotExtracted.json").read_text())
    payload["decisions"][0]["user_id"] = "someone-else"
    assert "decisions[0] is about user 'someone-else'" in _decode_error(payload)


def test_encoding_refuses_an_event_larger_than_the_limit() -> None:
    turns = [f.turn(content="x" * 30_000) for _ in range(40)]
    with pytest.raises(EventTooLarge, match="more than 1000000"):
        encode(f.snapshot(turns=turns))


# --- deterministic ids ---------------------------------------------------------------------------


def test_snapshot_id_depends_on_the_user_the_session_and_the_turns_in_order() -> None:
    assert snapshot_id("u1", "s1", ["t1", "t2"]) == snapshot_id("u1", "s1", ["t1", "t2"])
    ids = {
        snapshot_id(u, s, turns)
        for u in ("u1", "u2")
        for s in ("s1", "s2")
        for turns in (["t1"], ["t1", "t2"], ["t2", "t1"])
    }
    assert len(ids) == 12


def test_a_reused_session_id_with_new_turns_gets_a_new_snapshot_id() -> None:
    # The embedded log was lost and the session id reused: seq restarts, the id does not repeat.
    assert snapshot_id("u1", "s1", ["first-life-turn"]) != snapshot_id("u1", "s1", ["new-turn"])


def test_a_snapshot_of_no_turns_has_no_id() -> None:
    with pytest.raises(ValueError, match="at least one turn"):
        snapshot_id("u1", "s1", [])


def test_snapshot_id_is_stable_across_releases() -> None:
    # Stored snapshots are recognised by this id: changing the derivation breaks idempotency.
    stored = json.loads((SAMPLES / "SnapshotPromoted.json").read_text(encoding="utf-8"))
    turn_ids = [turn["turn_id"] for turn in stored["turns"]]
    assert snapshot_id("u1", "s1", turn_ids) == stored["event_id"]


def test_derived_id_is_deterministic_and_part_sensitive() -> None:
    first = derived_id("memory", "semantic", "snap", 0)
    assert first == derived_id("memory", "semantic", "snap", 0)
    assert first != derived_id("memory", "semantic", "snap", 1)
    assert derived_id("a", 1) == derived_id("a", "1")  # parts are joined as text
    assert derived_id("idle", "u1", "s1", 0) != derived_id("added", "u1", "s1", 0)


def test_snapshot_factory_uses_the_deterministic_id() -> None:
    event = f.snapshot(seq=4)
    assert isinstance(event, SnapshotPromoted)
    assert event.event_id == snapshot_id("u1", "s1", event.turn_ids)


# --- keys ----------------------------------------------------------------------------------------


def test_partition_keys() -> None:
    assert f.turn().key == "u1|s1"
    assert f.flush().key == "u1|s1"
    assert f.idle().key == "u1|s1"
    assert f.snapshot().key == "u1"
    assert f.memory_added().key == "u1"


# --- JSON Schemas --------------------------------------------------------------------------------


def test_export_schemas_writes_one_schema_per_event_type(tmp_path: Path) -> None:
    written = export_schemas(tmp_path / "schemas")
    assert sorted(path.name for path in written) == [
        f"{name}.schema.json" for name in EVENT_TYPE_NAMES
    ]
    for path in written:
        schema = json.loads(path.read_text(encoding="utf-8"))
        name = path.name.removesuffix(".schema.json")
        assert schema["$id"] == f"https://memstream.dev/schemas/{name}.json"
        assert schema["type"] == "object"
        assert "event_type" in schema["properties"]
        assert schema["additionalProperties"] is False


def test_json_schemas_pin_the_event_type() -> None:
    for name, schema in json_schemas().items():
        assert schema["properties"]["event_type"].get("const", name) == name


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda path: path.stem)
def test_samples_validate_against_exported_schemas(path: Path, tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    export_schemas(tmp_path)
    schema = json.loads((tmp_path / f"{path.stem}.schema.json").read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(schema).check_schema(schema)
    jsonschema.validate(json.loads(path.read_text(encoding="utf-8")), schema)


def test_oversized_text_record_is_measured_in_bytes() -> None:
    event = f.memory_added(content=f.content(attributes={"notes": "用" * 400_000}))
    text = orjson.dumps(event.model_dump(mode="json")).decode()  # `encode` refuses to write it
    assert len(text) < MAX_EVENT_BYTES < len(text.encode())
    with pytest.raises(EventDecodeError, match="bytes"):
        decode(text)
