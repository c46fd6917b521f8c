"""The stored form of a memory's vector: a BSON float32 vector, read back exactly, with the older
list of doubles still readable."""

from __future__ import annotations

import bson
import numpy as np
import pytest
from bson.binary import VECTOR_SUBTYPE, Binary, BinaryVectorDtype

from projections.vectors import dimension_of, pack_vector, unpack_matrix, unpack_vector

FLOAT32S = (0.5, -1.25, 3.4028234663852886e38, 1.401298464324817e-45, 0.0, -0.0, 0.1)
"""Values that are float32s (0.1 is not: it rounds)."""


def test_a_packed_vector_is_a_bson_float32_vector_of_little_endian_floats() -> None:
    packed = pack_vector([0.5, -1.25])
    assert isinstance(packed, Binary) and packed.subtype == VECTOR_SUBTYPE
    assert bytes(packed) == b"\x27\x00" + np.asarray([0.5, -1.25], dtype="<f4").tobytes()
    vector = packed.as_vector()
    assert vector.dtype == BinaryVectorDtype.FLOAT32 and vector.data == [0.5, -1.25]


def test_unpacking_gives_each_component_as_the_nearest_float32_exactly() -> None:
    unpacked = unpack_vector(pack_vector(FLOAT32S))
    assert unpacked == tuple(float(np.float32(value)) for value in FLOAT32S)
    assert unpacked[:-1] == FLOAT32S[:-1]
    assert unpacked[-1] == 0.10000000149011612
    assert all(isinstance(value, float) for value in unpacked)


def test_a_vector_unpacked_and_packed_again_is_the_same_binary() -> None:
    rng = np.random.default_rng(5)
    packed = pack_vector(rng.standard_normal(384).tolist())
    assert pack_vector(unpack_vector(packed)) == packed


def test_a_packed_vector_survives_bson_unchanged() -> None:
    packed = pack_vector([0.25, 0.75])
    decoded = bson.decode(bson.encode({"embedding": packed}))["embedding"]
    assert unpack_vector(decoded) == (0.25, 0.75)


def test_the_older_list_of_doubles_reads_as_its_floats() -> None:
    assert unpack_vector([0.1, 0.2, 1]) == (0.1, 0.2, 1.0)
    assert unpack_vector((0.3,)) == (0.3,)


def test_none_an_empty_list_and_an_empty_packed_vector_read_as_no_components() -> None:
    assert unpack_vector(None) == unpack_vector([]) == unpack_vector(pack_vector(())) == ()
    assert dimension_of(None) == dimension_of([]) == dimension_of(pack_vector([])) == 0


def test_the_dimension_of_either_form_is_its_component_count() -> None:
    assert dimension_of(pack_vector([1.0, 2.0, 3.0])) == dimension_of([1.0, 2.0, 3.0]) == 3


@pytest.mark.parametrize(
    "stored",
    [Binary(b"\x27\x00\x00\x00\x80"), Binary(b"\x03\x00\x01", VECTOR_SUBTYPE), Binary(b"ab"), "x"],
    ids=["truncated float", "int8 vector", "generic binary", "string"],
)
def test_anything_but_a_float32_vector_or_a_list_is_refused_with_a_clear_error(
    stored: object,
) -> None:
    with pytest.raises(ValueError, match="not a"):
        unpack_vector(stored)
    with pytest.raises(ValueError, match="not a"):
        dimension_of(stored)


def test_a_matrix_of_packed_vectors_holds_their_float32s_row_by_row() -> None:
    rows = np.random.default_rng(7).standard_normal((50, 16)).astype(np.float32)
    matrix = unpack_matrix([pack_vector(row.tolist()) for row in rows])
    assert matrix.dtype == np.float32 and matrix.flags.writeable and matrix.flags.c_contiguous
    assert np.array_equal(matrix, rows)


def test_a_matrix_of_lists_and_of_mixed_forms_equals_the_packed_one() -> None:
    rows = np.random.default_rng(8).standard_normal((6, 4)).astype(np.float32).tolist()
    packed = unpack_matrix([pack_vector(row) for row in rows])
    assert np.array_equal(unpack_matrix(rows), packed)
    mixed = [pack_vector(row) if number % 2 else row for number, row in enumerate(rows)]
    assert np.array_equal(unpack_matrix(mixed), packed)


def test_a_matrix_of_no_vectors_is_empty() -> None:
    assert unpack_matrix([]).shape == (0, 0)


@pytest.mark.parametrize(
    "rows",
    [
        [pack_vector([1.0, 2.0]), pack_vector([1.0])],
        [[1.0, 2.0], pack_vector([1.0])],
        [pack_vector([]), pack_vector([])],
    ],
    ids=["packed", "mixed", "empty"],
)
def test_vectors_of_different_dimensions_or_none_cannot_form_a_matrix(rows: list[object]) -> None:
    with pytest.raises(ValueError, match="different dimensions"):
        unpack_matrix(rows)


def test_a_matrix_of_one_packed_vector_is_writable() -> None:
    matrix = unpack_matrix([pack_vector([3.0, 4.0])])
    matrix /= 5
    assert matrix.tolist() == [[0.6000000238418579, 0.800000011920929]]
