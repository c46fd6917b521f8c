"""Fuzzing the codec: every event type round-trips; no input makes `decode` raise anything but
`EventDecodeError` (docs/architecture.md, "Events")."""

from __future__ import annotations

import contextlib
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from events.codec import EVENT_TYPES, EventDecodeError, EventTooLarge, decode, encode
from tests.support.fuzz import FUZZ, JSON, model_strategy


@pytest.mark.parametrize("model", EVENT_TYPES, ids=lambda model: model.__name__)
def test_every_generated_event_round_trips(model: Any) -> None:
    @FUZZ
    @given(model_strategy(model))
    def round_trips(event: Any) -> None:
        try:
            data = encode(event)
        except EventTooLarge:
            return
        assert decode(data) == event
        assert encode(decode(data)) == data

    round_trips()


def decodes_or_refuses(data: bytes | str) -> None:
    with contextlib.suppress(EventDecodeError):
        decode(data)


@FUZZ
@given(st.binary(max_size=300))
def test_decoding_arbitrary_bytes_raises_only_event_decode_error(data: bytes) -> None:
    decodes_or_refuses(data)


@FUZZ
@given(st.text(alphabet=st.characters() | st.characters(categories=["Cs"]), max_size=50))
@example('{"event_type": "TurnRecorded", "content": "\ud800"}')  # found: UnicodeEncodeError
def test_decoding_arbitrary_text_raises_only_event_decode_error(text: str) -> None:
    decodes_or_refuses(text)  # lone surrogates included: text that cannot be UTF-8


EVENT_TYPE_NAMES = [model.__name__ for model in EVENT_TYPES]


@FUZZ
@given(
    st.dictionaries(st.text(max_size=12), JSON, max_size=6),
    st.one_of(st.sampled_from(EVENT_TYPE_NAMES), JSON),
    st.one_of(st.integers(-1, 3), JSON),
)
def test_decoding_arbitrary_json_objects_raises_only_event_decode_error(
    fields: dict[str, Any], event_type: Any, schema_version: Any
) -> None:
    payload = {**fields, "event_type": event_type, "schema_version": schema_version}
    decodes_or_refuses(orjson.dumps(payload))


@pytest.mark.parametrize("model", EVENT_TYPES, ids=lambda model: model.__name__)
def test_a_valid_event_with_one_field_mangled_is_refused_with_event_decode_error(
    model: Any,
) -> None:
    @FUZZ
    @given(model_strategy(model), st.data())
    def mangled(event: Any, data: st.DataObject) -> None:
        payload = orjson.loads(encode(event))
        name = data.draw(st.sampled_from(sorted(payload)))
        payload[name] = data.draw(JSON)
        decodes_or_refuses(orjson.dumps(payload))

    mangled()
