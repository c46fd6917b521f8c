"""The sealed envelope's sizes, for record-size limits checked before sealing."""

from __future__ import annotations

import pytest

from events.codec import MAX_EVENT_BYTES
from events.sealed import (
    Sealed,
    base64_chars,
    plaintext_bytes_within,
    sealed_json_bytes,
    sealed_text_json_bytes,
    to_base64,
)
from events.turns import MAX_CONTENT_CHARS


def sealed_of(plaintext_bytes: int, key_id: str = "k" * 36) -> Sealed:
    """A well-formed envelope of the right sizes (sizes do not depend on the bytes' values)."""
    return Sealed(
        key_id=key_id, nonce=to_base64(bytes(12)), ciphertext=to_base64(bytes(plaintext_bytes + 16))
    )


@pytest.mark.parametrize("size", [0, 1, 2, 3, 200, 4_000, 128_000])
def test_the_predicted_size_is_the_compact_json_size(size: int) -> None:
    assert sealed_json_bytes(size) == len(sealed_of(size).model_dump_json())


def test_the_predicted_size_follows_the_key_id_length() -> None:
    assert sealed_json_bytes(10, key_id_chars=5) == len(sealed_of(10, "k" * 5).model_dump_json())


def test_a_two_hundred_byte_turn_takes_four_hundred_and_eighteen_bytes_sealed() -> None:
    assert sealed_json_bytes(200) == 418


def test_the_longest_turn_sealed_stays_far_below_the_record_limit() -> None:
    worst = sealed_text_json_bytes("語" * MAX_CONTENT_CHARS)  # 3 UTF-8 bytes each
    assert worst == sealed_json_bytes(3 * MAX_CONTENT_CHARS) < MAX_EVENT_BYTES // 5


@pytest.mark.parametrize("budget", [0, 153, 154, 157, 158, 1_000, 512_000])
def test_the_plaintext_within_a_budget_is_the_most_that_fits(budget: int) -> None:
    most = plaintext_bytes_within(budget)
    assert sealed_json_bytes(most) <= budget or (most == 0 and budget < sealed_json_bytes(0))
    assert sealed_json_bytes(most + 1) > budget


def test_base64_takes_four_characters_per_started_three_bytes() -> None:
    assert [base64_chars(n) for n in (0, 1, 2, 3, 4, 16, 28)] == [0, 4, 4, 4, 8, 24, 40]
