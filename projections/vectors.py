"""How a memory's vector is stored: packed float32s in a BSON binary vector (docs/architecture.md,
"Search").

The `embedding` field of a `memories` document is a BSON binary of subtype 9 (`Vector`, what
MongoDB's vector search reads): a dtype byte 0x27 (float32), a padding byte 0, then the
components as little-endian float32s — 1,538 bytes for 384 dimensions, where a list of doubles
takes 4.9 kB of BSON and one Python float per component to decode. float32 is what the
search index computes with and what the embedding models produce (events carry 7 significant
digits: `handlers.vectors.rounded`), so packing loses nothing search used.

Databases projected before this format hold a list of doubles; every reader goes through
`unpack_vector` or `unpack_matrix`, which take either form, so old, new and mixed databases
read alike. The event in `memory_events` keeps its own list of floats: replay from the
collections rebuilds events from there, and fingerprints hash the event, not this field.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from bson.binary import VECTOR_SUBTYPE, Binary, BinaryVectorDtype
from numpy.typing import NDArray

_HEADER = BinaryVectorDtype.FLOAT32.value + b"\x00"
"""A float32 vector's dtype byte and its padding byte (always 0 for float32)."""
_FLOAT32 = np.dtype("<f4")


def pack_vector(vector: Sequence[float]) -> Binary:
    """`vector` as a BSON float32 vector (each component rounded to the nearest float32)."""
    return Binary(_HEADER + np.asarray(vector, dtype=_FLOAT32).tobytes(), VECTOR_SUBTYPE)


def unpack_vector(stored: object) -> tuple[float, ...]:
    """The components of a stored vector, packed or a list of numbers; `()` for None or empty.

    A packed vector gives its float32s exactly (as Python floats); anything else that is not a
    vector raises ValueError."""
    if stored is None:
        return ()
    if isinstance(stored, Binary):
        return tuple(_packed(stored).tolist())
    if isinstance(stored, list | tuple):
        return tuple(float(value) for value in stored)
    raise ValueError(f"not a stored vector: {type(stored).__name__}")


def dimension_of(stored: object) -> int:
    """How many components a stored vector has (0 for None or empty), without unpacking it."""
    if stored is None:
        return 0
    if isinstance(stored, Binary):
        if not _is_packed(stored):
            _packed(stored)  # raises: not a float32 vector
        return (len(stored) - len(_HEADER)) // 4
    if isinstance(stored, list | tuple):
        return len(stored)
    raise ValueError(f"not a stored vector: {type(stored).__name__}")


def unpack_matrix(stored: Sequence[object]) -> NDArray[np.float32]:
    """Stored vectors of one dimension as the rows of one float32 matrix (a fresh, writable
    array). Packed vectors are copied in one block, never through Python floats; lists (an
    older database) are converted by numpy, as before. Rows of different dimensions, or an
    empty row, raise ValueError."""
    if not stored:
        return np.zeros((0, 0), dtype=np.float32)
    block = _packed_block(stored)
    if block is not None:
        return block
    dimensions = {dimension_of(row) for row in stored}
    if len(dimensions) != 1 or 0 in dimensions:
        raise ValueError(f"vectors of different dimensions cannot form a matrix: {dimensions}")
    if not any(isinstance(row, Binary) for row in stored):
        return np.asarray(stored, dtype=np.float32)
    matrix = np.empty((len(stored), dimensions.pop()), dtype=np.float32)
    for number, row in enumerate(stored):
        matrix[number] = _packed(row) if isinstance(row, Binary) else np.asarray(row)
    return matrix


def _packed_block(stored: Sequence[object]) -> NDArray[np.float32] | None:
    """The matrix of `stored` from its bytes in one piece, when every row is a packed float32
    vector of one size (None otherwise: the caller goes row by row, and names a bad row)."""
    rows = [row for row in stored if isinstance(row, Binary) and _is_packed(row)]
    sizes = {len(row) for row in rows}
    if len(rows) != len(stored) or len(sizes) != 1 or sizes == {len(_HEADER)}:
        return None
    block = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), sizes.pop())
    body = block[:, len(_HEADER) :].copy()  # contiguous, aligned and writable
    return body.view(_FLOAT32).astype(np.float32, copy=False)


def _is_packed(stored: Binary) -> bool:
    """Whether `stored` is a BSON float32 vector."""
    return (
        stored.subtype == VECTOR_SUBTYPE
        and stored[: len(_HEADER)] == _HEADER
        and (len(stored) - len(_HEADER)) % 4 == 0
    )


def _packed(stored: Binary) -> NDArray[np.float32]:
    """The float32s of a packed vector."""
    if not _is_packed(stored):
        raise ValueError(
            f"not a float32 vector: binary subtype {stored.subtype}, {len(stored)} bytes"
        )
    return np.frombuffer(stored, dtype=_FLOAT32, offset=len(_HEADER))
