"""The filters a search takes, declared once.

`MemoryClient.search`, `SyncMemoryClient.search` and `HttpMemoryClient.search` take them as
keyword arguments (`**filters: Unpack[SearchFilters]`, so an editor and mypy know each); the
read model applies them as a `handlers.search.Filters`. The HTTP API's `Search` body declares
each again with its limits (a unit test keeps the three in step). A new filter is a key here,
its rule in `Filters.matches`, and its field in `memstream/api/models.py`.

No `from __future__ import annotations`: the keys are read at run time (`__optional_keys__`).
"""

from collections.abc import Collection
from datetime import datetime
from typing import TypedDict

from events.memories import MemoryType, Owner
from handlers.search import Filters


class SearchFilters(TypedDict, total=False):
    """Which memories a search considers; a filter left out or None is no condition."""

    types: Collection[MemoryType] | None
    """Only memories of these types."""
    agent_id: str | None
    """Only memories learned from, or saved by, this agent."""
    subject: str | None
    """Only memories about this subject (case-insensitive)."""
    owner: Owner | None
    """Only memories of this owner (`user` or `agent`)."""
    category: str | None
    """Only memories of this category."""
    since: datetime | None
    """Only memories created at or after this time."""
    until: datetime | None
    """Only memories created at or before this time."""


def as_filters(filters: SearchFilters) -> Filters:
    """The filters as the read model applies them."""
    return Filters(**filters)
