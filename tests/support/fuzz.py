"""Hypothesis settings and strategies shared by the fuzz tests.

`FUZZ` is deterministic (`derandomize=True`: the same examples on every run, so CI never
flakes on a new one) and bounded (`max_examples`), so each fuzz test takes a few seconds.
`model_strategy` builds valid instances of a pydantic model from its fields' types and
constraints (hypothesis' own `from_type` ignores pydantic's `pattern` and makes naive datetimes,
which memstream refuses); candidates the model's validators refuse are filtered out.
"""

from __future__ import annotations

import types
from datetime import UTC, datetime
from functools import cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

FUZZ = settings(
    derandomize=True,
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
"""Any JSON value (orjson's range: 64-bit integers, finite floats)."""

TIMES = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@cache
def model_strategy(model: type[BaseModel]) -> st.SearchStrategy[Any]:
    """Valid instances of `model` (see the module doc)."""
    required = {}
    optional = {}
    for name, info in model.model_fields.items():
        strategy = _field(info)
        if info.is_required():
            required[name] = strategy
        elif name not in ("event_type", "schema_version"):
            optional[name] = strategy
    return (
        st.fixed_dictionaries(required, optional=optional)
        .map(lambda fields: _built(model, fields))
        .filter(lambda built: built is not None)
    )


def _built(model: type[BaseModel], fields: dict[str, Any]) -> BaseModel | None:
    try:
        return model(**fields)
    except ValidationError:
        return None


def _field(info: FieldInfo) -> st.SearchStrategy[Any]:
    return _typed(info.annotation, list(info.metadata))


def _typed(annotation: Any, metadata: list[Any]) -> st.SearchStrategy[Any]:
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *extra = get_args(annotation)
        for item in extra:
            metadata = [*metadata, *(item.metadata if isinstance(item, FieldInfo) else [item])]
        return _typed(inner, metadata)
    if origin in (Union, types.UnionType):
        return st.one_of(
            st.none() if arg is type(None) else _typed(arg, metadata)
            for arg in get_args(annotation)
        )
    if origin is Literal:
        return st.sampled_from(get_args(annotation))
    if origin is tuple:
        item = _typed(get_args(annotation)[0], [])
        return st.lists(item, max_size=3).map(tuple)
    if origin is dict:
        return st.dictionaries(st.text(max_size=10), JSON, max_size=3)
    if annotation is datetime:
        return TIMES
    if annotation is str:
        return _text(metadata)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.integers(min_value=_bound(metadata, Ge, Gt, -(2**31)), max_value=2**31)
    if annotation is float:
        return st.floats(
            min_value=_bound(metadata, Ge, Gt, None),
            max_value=_bound(metadata, Le, Lt, None),
            allow_nan=False,
            allow_infinity=False,
        )
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_strategy(annotation)
    if annotation is Any:
        return JSON
    return st.from_type(annotation)


def _text(metadata: list[Any]) -> st.SearchStrategy[str]:
    low = max([m.min_length for m in metadata if isinstance(m, MinLen)], default=0)
    high = min([m.max_length for m in metadata if isinstance(m, MaxLen)], default=40)
    pattern = next(
        (getattr(m, "pattern", None) for m in metadata if getattr(m, "pattern", None)), None
    )
    if pattern:
        return st.from_regex(pattern, fullmatch=True).filter(lambda t: low <= len(t) <= high)
    return st.text(min_size=low, max_size=min(high, max(low, 40)))


def _bound(metadata: list[Any], inclusive: type, exclusive: type, default: Any) -> Any:
    names = {Ge: "ge", Gt: "gt", Le: "le", Lt: "lt"}
    for item in metadata:
        if isinstance(item, inclusive):
            return getattr(item, names[inclusive])
        if isinstance(item, exclusive):
            value = getattr(item, names[exclusive])
            step = 1 if isinstance(value, int) else 0
            return value + step if exclusive is Gt else value - step
    return default
