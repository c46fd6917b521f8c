"""One write queued for a batch's ordered bulk (`projections.deciding`), and folding the next
write of the same document into it.

Two updates of one document are sent as one where that changes nothing (`folded`): both
conditions decided to hold, no field written by both except counters added, lists pushed,
values set or raised. A second condition that reads what the first write changed is replaced by
the fetched values it was decided on, and the update becomes an upsert: if another projector
changed the document since the fetch, it fails on the duplicate id instead of being applied
wrongly, and the batch is decided again (`projections.batch`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from projections.documents import changed_paths, condition_paths, covered, normal, overlapping, walk

Key = tuple[str, Any]
"""A document: its collection and id."""

MERGEABLE = frozenset({"$set", "$setOnInsert", "$inc", "$max", "$push"})
"""The update operators two folded updates may use."""


@dataclass
class Queued:
    """One write to send: a new document's insert, or an update."""

    collection: str
    key: Key | None
    """The document it writes (None: several, by a list of ids)."""
    selector: dict[str, Any] = field(default_factory=dict)
    change: dict[str, Any] = field(default_factory=dict)
    upsert: bool = False
    many: bool = False
    certain: bool = False
    """Its condition is known to hold (none, or decided by the batch): it may be merged."""
    insert: bool = False
    before: dict[str, Any] | None = None
    """The fetched fields of the document as they stood just before this update."""
    fields: frozenset[str] = frozenset()
    """Which fields were fetched."""


def folded(
    previous: Queued, selector: dict[str, Any], change: dict[str, Any], upsert: bool
) -> bool:
    """Fold the next update of `previous`'s document into it when sending them as one changes
    nothing (see the module docstring); whether it was."""
    merged = _merged(previous, selector, change, upsert)
    if merged is None:
        return False
    previous.selector, previous.change, previous.upsert = merged
    return True


def _merged(
    previous: Queued, selector: dict[str, Any], change: dict[str, Any], upsert: bool
) -> tuple[dict[str, Any], dict[str, Any], bool] | None:
    """`previous` and the next write of the same document as one update, when sending them
    together changes nothing: both conditions decided to hold, no field written by both except
    counters added, lists pushed, values set or raised. A second condition that reads what the
    first write changes is replaced by the values it was decided on (`_as_held`: the
    fetched fields as they stood just before the first write), and the update becomes an upsert: if
    the document changed since, it fails on its duplicate id instead of doing nothing (the
    batch is decided again)."""
    if previous.insert or previous.many or not previous.certain:
        return None
    if not set(previous.change) | set(change) <= MERGEABLE:
        return None
    condition = {name: value for name, value in selector.items() if name != "_id"}
    written = changed_paths(previous.change)
    read = condition_paths(condition)
    if any(overlapping(path, done) for path in read for done in written):
        guards = [_as_held(previous, path) for path in read]
        if any(guard is None for guard in guards):
            return None
        condition = {name: value for guard in guards if guard for name, value in guard.items()}
        upsert = True
    if any(
        name in previous.selector and previous.selector[name] != value
        for name, value in condition.items()
    ):
        return None
    combined: dict[str, Any] = {
        operator: dict(fields) for operator, fields in previous.change.items()
    }
    for operator, fields in change.items():
        into = combined.setdefault(operator, {})
        for path, operand in fields.items():
            others = [p for op, fs in combined.items() for p in fs if op != operator or p != path]
            if any(overlapping(path, other) for other in others):
                return None
            if path not in into or operator == "$set":
                into[path] = operand
            elif operator == "$inc":
                into[path] = into[path] + operand
            elif operator == "$max":
                if not _comparable(into[path], operand):
                    return None
                into[path] = operand if normal(operand) > normal(into[path]) else into[path]
            elif operator == "$push":
                pushed = _pushed(into[path], operand)
                if pushed is None:
                    return None
                into[path] = pushed
            # $setOnInsert: the first value stays, as the first upsert would have set it
    return {**previous.selector, **condition}, combined, previous.upsert or upsert


def _comparable(first: Any, second: Any) -> bool:
    """Two values `$max` compares alike in memory and on the server: of one kind, not null."""
    kinds = (int, float, str, datetime)
    return any(isinstance(first, k) and isinstance(second, k) for k in kinds) and not any(
        isinstance(v, bool) for v in (first, second)
    )


def _pushed(first: Any, second: Any) -> dict[str, Any] | None:
    """Two `$push`es of one array as one (the same `$slice` keeps the same tail)."""

    def each(operand: Any) -> tuple[list[Any], dict[str, Any]]:
        if isinstance(operand, Mapping) and "$each" in operand:
            return list(operand["$each"]), {k: v for k, v in operand.items() if k != "$each"}
        return [operand], {}

    items, options = each(first)
    more, more_options = each(second)
    if options != more_options or set(options) - {"$slice"}:
        return None
    return {"$each": items + more, **options}


def _as_held(queued: Queued, path: str) -> dict[str, Any] | None:
    """A condition that the fetched field holding `path` still holds, when `queued` is applied,
    what it held then (None when that cannot be said exactly)."""
    fields = [f for f in queued.fields if covered(path, [f])]
    if len(fields) != 1 or queued.before is None:
        return None
    values, through_array = walk(queued.before, fields[0])
    if through_array or len(values) > 1 or (values and values[0] is None):
        return None
    return {fields[0]: values[0] if values else {"$exists": False}}
