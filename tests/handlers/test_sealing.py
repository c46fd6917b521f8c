"""Sealing and opening event content: round trips, and every way a value must refuse to open."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.sealed import Sealed, from_base64, sealed_json_bytes, to_base64
from handlers.sealing import (
    DataKey,
    KeyDestroyed,
    SealBroken,
    SealingError,
    associated_data,
    data_key_id,
    open_json,
    open_sealed,
    open_text,
    open_vector,
    seal,
    seal_json,
    seal_text,
    seal_vector,
)
from tests.support.fuzz import FUZZ, JSON

NONCE = bytes(range(12))
CONTENT = associated_data("turn-1", "content")


def key(material: int = 7, subject: str = "s1") -> DataKey:
    return DataKey(data_key_id("session", "u1", subject, 1), bytes([material]) * 32)


def flipped(text: str, index: int) -> str:
    """`text` (base64) with one bit of byte `index` flipped."""
    data = bytearray(from_base64(text))
    data[index] ^= 0x01
    return to_base64(bytes(data))


# ---- round trips -------------------------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=2_000), st.binary(min_size=12, max_size=12))
def test_any_bytes_open_to_what_was_sealed(plaintext: bytes, nonce: bytes) -> None:
    sealed = seal(plaintext, key(), associated=CONTENT, nonce=nonce)
    assert open_sealed(sealed, key(), associated=CONTENT) == plaintext


@FUZZ
@given(st.text(max_size=500))
def test_text_opens_to_the_same_text_and_the_wire_size_is_as_predicted(text: str) -> None:
    sealed = seal_text(text, key(), associated=CONTENT, nonce=NONCE)
    assert open_text(sealed, key(), associated=CONTENT) == text
    assert len(sealed.model_dump_json()) == sealed_json_bytes(len(text.encode()))


@FUZZ
@given(JSON)
def test_any_json_value_opens_to_an_equal_value(value: object) -> None:
    sealed = seal_json(value, key(), associated=CONTENT, nonce=NONCE)
    assert open_json(sealed, key(), associated=CONTENT) == value


@FUZZ
@given(st.lists(st.floats(allow_nan=False), max_size=64))
def test_any_vector_opens_to_exactly_the_same_floats(vector: list[float]) -> None:
    sealed = seal_vector(vector, key(), associated=CONTENT, nonce=NONCE)
    assert open_vector(sealed, key(), associated=CONTENT) == tuple(vector)


def test_a_dict_of_attributes_opens_to_an_equal_dict() -> None:
    attributes = {"title": "Trip to Lisbon", "steps": ["book", "pack"], "year": 2026, "ok": True}
    sealed = seal_json(attributes, key(), associated=CONTENT, nonce=NONCE)
    assert open_json(sealed, key(), associated=CONTENT) == attributes


def test_an_embedding_opens_to_exactly_the_same_floats() -> None:
    vector = (0.1, -0.2345678, 1e-30, 3.0, -0.0)
    sealed = seal_vector(vector, key(), associated=CONTENT, nonce=NONCE)
    assert open_vector(sealed, key(), associated=CONTENT) == vector


def test_a_sealed_value_survives_its_json_round_trip() -> None:
    sealed = seal_text("I work at Stripe.", key(), associated=CONTENT, nonce=NONCE)
    again = Sealed.model_validate_json(sealed.model_dump_json())
    assert open_text(again, key(), associated=CONTENT) == "I work at Stripe."


@pytest.mark.parametrize("size", [0, 1, 2, 3, 100])
def test_the_plaintext_size_is_read_from_the_envelope_without_opening(size: int) -> None:
    assert seal(bytes(size), key(), associated=CONTENT, nonce=NONCE).plaintext_bytes == size


def test_the_ciphertext_does_not_contain_the_plaintext() -> None:
    sealed = seal_text("my secret diagnosis", key(), associated=CONTENT, nonce=NONCE)
    assert b"secret" not in sealed.model_dump_json().encode()
    assert b"secret" not in sealed.ciphertext_bytes


def test_the_same_text_under_two_nonces_seals_to_two_ciphertexts() -> None:
    first = seal_text("same", key(), associated=CONTENT, nonce=NONCE)
    second = seal_text("same", key(), associated=CONTENT, nonce=bytes(12))
    assert first.ciphertext != second.ciphertext


# ---- tampering ---------------------------------------------------------------------------------


@pytest.mark.parametrize("index", [0, 5, -1])  # first byte, inside, last byte of the tag
def test_a_flipped_bit_in_the_ciphertext_or_tag_is_refused(index: int) -> None:
    sealed = seal_text("I live in Lisbon.", key(), associated=CONTENT, nonce=NONCE)
    length = len(sealed.ciphertext_bytes)
    tampered = sealed.model_copy(update={"ciphertext": flipped(sealed.ciphertext, index % length)})
    with pytest.raises(SealBroken):
        open_sealed(tampered, key(), associated=CONTENT)


def test_a_changed_nonce_is_refused() -> None:
    sealed = seal_text("I live in Lisbon.", key(), associated=CONTENT, nonce=NONCE)
    tampered = sealed.model_copy(update={"nonce": flipped(sealed.nonce, 3)})
    with pytest.raises(SealBroken):
        open_sealed(tampered, key(), associated=CONTENT)


def test_a_truncated_ciphertext_is_refused() -> None:
    sealed = seal_text("I live in Lisbon.", key(), associated=CONTENT, nonce=NONCE)
    shorter = to_base64(sealed.ciphertext_bytes[1:])
    with pytest.raises(SealBroken):
        open_sealed(sealed.model_copy(update={"ciphertext": shorter}), key(), associated=CONTENT)


def test_a_wire_value_with_a_short_nonce_or_no_tag_is_not_a_sealed_value() -> None:
    sealed = seal_text("x", key(), associated=CONTENT, nonce=NONCE).model_dump()
    with pytest.raises(ValueError, match="nonce"):
        Sealed.model_validate({**sealed, "nonce": to_base64(bytes(8))})
    with pytest.raises(ValueError, match=r"(?s)ciphertext.*at least 24 characters"):
        Sealed.model_validate({**sealed, "ciphertext": to_base64(bytes(15))})
    for not_base64 in ("not base64!" + "A" * 24, "A" * 25, "A" * 22 + "=A"):
        with pytest.raises(ValueError, match=r"(?s)ciphertext.*pattern"):
            Sealed.model_validate({**sealed, "ciphertext": not_base64})


# ---- associated data ---------------------------------------------------------------------------


def test_a_value_moved_to_another_turn_does_not_open() -> None:
    sealed = seal_text("I live in Lisbon.", key(), associated=CONTENT, nonce=NONCE)
    with pytest.raises(SealBroken, match="moved"):
        open_sealed(sealed, key(), associated=associated_data("turn-2", "content"))


def test_a_value_moved_to_another_field_of_the_same_turn_does_not_open() -> None:
    sealed = seal_text("Alice", key(), associated=associated_data("turn-1", "name"), nonce=NONCE)
    with pytest.raises(SealBroken):
        open_sealed(sealed, key(), associated=CONTENT)


def test_associated_data_cannot_be_confused_by_moving_characters_between_id_and_field() -> None:
    assert associated_data("a", "bc") != associated_data("ab", "c")
    assert associated_data("a\x00", "b") != associated_data("a", "\x00b")


# ---- keys --------------------------------------------------------------------------------------


def test_a_value_sealed_with_another_key_is_refused_naming_both_keys() -> None:
    sealed = seal_text("I live in Lisbon.", key(subject="s1"), associated=CONTENT, nonce=NONCE)
    other = key(subject="s2")
    with pytest.raises(SealBroken, match=f"{sealed.key_id}.*{other.key_id}"):
        open_sealed(sealed, other, associated=CONTENT)


def test_a_value_under_the_right_key_id_but_other_material_is_refused() -> None:
    sealed = seal_text("I live in Lisbon.", key(material=1), associated=CONTENT, nonce=NONCE)
    with pytest.raises(SealBroken):
        open_sealed(sealed, key(material=2), associated=CONTENT)


def test_a_value_relabelled_with_another_key_id_is_refused_even_by_that_key() -> None:
    """The key id is covered by the tag: an attacker holding key B cannot re-label a value."""
    sealed = seal_text("x", key(material=1, subject="s1"), associated=CONTENT, nonce=NONCE)
    relabelled = sealed.model_copy(update={"key_id": key(material=1, subject="s2").key_id})
    with pytest.raises(SealBroken):
        open_sealed(relabelled, key(material=1, subject="s2"), associated=CONTENT)


def test_a_destroyed_key_means_forgotten_not_broken() -> None:
    sealed = seal_text("I live in Lisbon.", key(), associated=CONTENT, nonce=NONCE)
    with pytest.raises(KeyDestroyed) as raised:
        open_text(sealed, None, associated=CONTENT)
    assert raised.value.key_id == sealed.key_id
    assert not isinstance(raised.value, SealBroken)


def test_a_nonce_of_the_wrong_length_is_refused_before_sealing() -> None:
    with pytest.raises(SealingError, match="12 bytes"):
        seal(b"x", key(), associated=CONTENT, nonce=bytes(8))


def test_key_material_of_the_wrong_length_is_refused_and_never_printed() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        DataKey("k", bytes(16))
    assert "material" not in repr(key()) and "\\x07" not in repr(key())


def test_key_ids_are_deterministic_and_differ_by_scope_owner_subject_and_generation() -> None:
    first = data_key_id("session", "u1", "s1", 1)
    assert first == data_key_id("session", "u1", "s1", 1) and len(first) == 36
    others = {
        data_key_id("session", "u1", "s1", 2),
        data_key_id("session", "u1", "s2", 1),
        data_key_id("session", "u2", "s1", 1),
        data_key_id("memory", "u1", "s1", 1),
        data_key_id("user", "u1", None, 1),
    }
    assert first not in others and len(others) == 5


def test_a_user_key_has_no_subject_and_a_session_key_needs_one() -> None:
    with pytest.raises(ValueError, match="no subject"):
        data_key_id("user", "u1", "s1", 1)
    with pytest.raises(ValueError, match="names its session"):
        data_key_id("session", "u1", None, 1)
    with pytest.raises(ValueError, match="from 1"):
        data_key_id("memory", "u1", "m1", 0)
