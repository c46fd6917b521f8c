"""The HTTP API's path parameters shared by its route modules."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

UserPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=200,
        pattern=r"^[^\s|\x00-\x1f]+$",
        description="The end user (a service account key: its own id; see each operation).",
    ),
]
IdPath = Annotated[str, Path(min_length=1, max_length=200)]
"""An id in a path: a memory's, a request's."""
