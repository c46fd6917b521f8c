"""Checking a real result against the type the SDK declares for it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def assert_conforms(document: Mapping[str, Any], kind: Any) -> None:
    """`document` has every key `kind` (a TypedDict) requires and none it does not declare."""
    keys = set(document)
    required: frozenset[str] = kind.__required_keys__
    declared = required | kind.__optional_keys__
    assert required <= keys, f"{kind.__name__} lacks {sorted(required - keys)}"
    assert keys <= declared, f"{kind.__name__} has undeclared {sorted(keys - declared)}"
