"""The part of MongoDB's query and update language the projections use, on documents in memory.

A batch of records (`projections.batch`) writes each document it creates once, as one insert:
every later write of the batch to that document is applied here, in memory, instead of being
sent. Those writes are conditional (`{"status": "current"}`, a profile field older than the
observation, an evidence entry not there yet), so applying them needs the server's semantics:

* a path reaches through arrays of documents (`evidence.event_id` is every entry's id); a
  condition holds if any value it reaches satisfies it, `$ne` and `$exists: false` if none does;
* `{field: value}` also matches an array holding `value`, and `{field: None}` a missing field;
* `$lt` and `$max` compare only values of one kind (numbers, strings, times): MongoDB's type
  brackets; times at the millisecond the server keeps (`normal`);
* documents compare field by field in order, as BSON does.

Anything else — an operator not listed in `QUERY_OPERATORS` or `UPDATE_OPERATORS`, a path
through a value that is neither a document nor an array of them — raises `Unsupported`: the
batch then projects its records one by one instead (`projections.batch`), so a projection that
grows a new kind of write is never applied wrongly, only more slowly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

QUERY_OPERATORS = frozenset({"$eq", "$ne", "$exists", "$lt", "$in", "$or", "$and"})
UPDATE_OPERATORS = frozenset(
    {"$set", "$setOnInsert", "$unset", "$inc", "$max", "$push", "$addToSet"}
)
_MISSING = object()


class Unsupported(ValueError):
    """A condition or change this module does not evaluate like the server would."""


def normal(value: Any) -> Any:
    """`value` as the server holds and compares it: times cut to milliseconds, tuples as
    arrays, documents as their ordered fields (BSON compares documents field by field)."""
    if isinstance(value, datetime):
        return value.replace(microsecond=value.microsecond // 1000 * 1000)
    if isinstance(value, Mapping):
        return ("document", tuple((key, normal(item)) for key, item in value.items()))
    if isinstance(value, list | tuple):
        return [normal(item) for item in value]
    return value


# -- conditions --------------------------------------------------------------------------------


def reached(document: Mapping[str, Any], path: str) -> list[Any]:
    """Every value the dotted `path` reaches in `document`, through arrays of documents."""
    return walk(document, path)[0]


def walk(document: Mapping[str, Any], path: str) -> tuple[list[Any], bool]:
    """The values `path` reaches, and whether it went through an array to reach them."""
    values: list[Any] = [document]
    through_array = False
    for part in path.split("."):
        found: list[Any] = []
        for value in values:
            if isinstance(value, Mapping):
                item = value.get(part, _MISSING)
                if item is not _MISSING:
                    found.append(item)
            elif isinstance(value, list):
                if part.isdigit():
                    raise Unsupported(f"an array index in {path!r}")
                through_array = True
                found.extend(
                    element[part]
                    for element in value
                    if isinstance(element, Mapping) and part in element
                )
            # a scalar has no fields: the path reaches nothing through it
        values = found
    return values, through_array


def matches(document: Mapping[str, Any], condition: Mapping[str, Any]) -> bool:
    """Whether `document` satisfies the query `condition` (every clause)."""
    for key, clause in condition.items():
        if key == "$or":
            if not any(matches(document, part) for part in clause):
                return False
        elif key == "$and":
            if not all(matches(document, part) for part in clause):
                return False
        elif key.startswith("$"):
            raise Unsupported(f"the query operator {key}")
        elif not _holds(*walk(document, key), clause):
            return False
    return True


def _holds(values: list[Any], through_array: bool, clause: Any) -> bool:
    if _asks_for_null(clause) and through_array:
        raise Unsupported("null or a missing field through an array")
    if not (isinstance(clause, Mapping) and clause and all(k.startswith("$") for k in clause)):
        return _equal(values, clause)
    for operator, operand in clause.items():
        if operator not in QUERY_OPERATORS or operator in ("$or", "$and"):
            raise Unsupported(f"the query operator {operator}")
        if operator == "$eq" and not _equal(values, operand):
            return False
        if operator == "$ne" and _equal(values, operand):
            return False
        if operator == "$exists" and bool(values) != bool(operand):
            return False
        if operator == "$in" and not any(_equal(values, option) for option in operand):
            return False
        if operator == "$lt" and not any(_less(value, operand) for value in _with_elements(values)):
            return False
    return True


def _asks_for_null(clause: Any) -> bool:
    """Whether `clause` compares with None (a missing field then counts as null)."""
    if clause is None:
        return True
    if not isinstance(clause, Mapping):
        return False
    operands = [clause.get("$eq", 0), clause.get("$ne", 0), *clause.get("$in", ())]
    return any(operand is None for operand in operands)


def _equal(values: list[Any], wanted: Any) -> bool:
    """`{path: wanted}`: a value reached equals it, or is an array holding it; None also
    matches a path that reaches nothing."""
    if wanted is None and not values:
        return True
    target = normal(wanted)
    return any(normal(value) == target for value in _with_elements(values))


def _with_elements(values: Iterable[Any]) -> list[Any]:
    """The values, and the elements of those that are arrays (a condition tests both)."""
    every: list[Any] = []
    for value in values:
        every.append(value)
        if isinstance(value, list):
            every.extend(value)
    return every


def _bracket(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime):
        return "time"
    return None


def _less(value: Any, than: Any) -> bool:
    kind = _bracket(value)
    if kind is None or kind != _bracket(than):
        if _bracket(than) is None:
            raise Unsupported(f"a comparison with {type(than).__name__}")
        return False
    return bool(normal(value) < normal(than))


def _greater(value: Any, than: Any) -> bool:
    """`$max`'s comparison: values of one kind (null, below everything, is handled apart)."""
    if value is None:
        return False
    if _bracket(value) is None or _bracket(value) != _bracket(than):
        raise Unsupported(f"$max of {type(than).__name__} and {type(value).__name__}")
    return bool(normal(than) < normal(value))


def condition_paths(condition: Mapping[str, Any]) -> set[str]:
    """The fields `condition` reads."""
    paths: set[str] = set()
    for key, clause in condition.items():
        if key in ("$or", "$and"):
            for part in clause:
                paths |= condition_paths(part)
        elif key.startswith("$"):
            raise Unsupported(f"the query operator {key}")
        else:
            paths.add(key)
    return paths


def covered(path: str, by: Iterable[str]) -> bool:
    """Whether `path` lies within one of the fields `by` (the same field, or inside it)."""
    return any(path == field or path.startswith(f"{field}.") for field in by)


def overlapping(first: str, second: str) -> bool:
    """Whether two dotted paths name the same field, or one lies inside the other."""
    return first == second or first.startswith(f"{second}.") or second.startswith(f"{first}.")


# -- changes -----------------------------------------------------------------------------------


def changed_paths(change: Mapping[str, Any]) -> set[str]:
    """The fields `change` writes."""
    paths: set[str] = set()
    for operator, fields in change.items():
        if operator not in UPDATE_OPERATORS:
            raise Unsupported(f"the update operator {operator}")
        paths |= set(fields)
    return paths


def apply_change(document: dict[str, Any], change: Mapping[str, Any], *, inserting: bool) -> None:
    """Apply the update `change` to `document` in place, as the server would; `inserting`: the
    update is an upsert creating `document` (so `$setOnInsert` applies).

    Containers on a changed path are copied before they change, so values shared with the
    caller (an event's attributes) are never modified."""
    for operator, fields in change.items():
        if operator not in UPDATE_OPERATORS:
            raise Unsupported(f"the update operator {operator}")
        if operator == "$setOnInsert" and not inserting:
            continue
        for path, operand in fields.items():
            _apply_one(document, operator, path.split("."), operand)


def _apply_one(document: dict[str, Any], operator: str, parts: list[str], operand: Any) -> None:
    parent = _parent(document, parts, create=operator != "$unset")
    if parent is None:
        return
    name = parts[-1]
    current = parent.get(name, _MISSING)
    if operator in ("$set", "$setOnInsert"):
        parent[name] = operand
    elif operator == "$unset":
        parent.pop(name, None)
    elif operator == "$inc":
        if current is _MISSING:
            parent[name] = operand
        elif _bracket(current) == "number" and _bracket(operand) == "number":
            parent[name] = current + operand
        else:
            raise Unsupported(f"$inc of {type(current).__name__}")
    elif operator == "$max":
        if current is _MISSING or current is None or _greater(operand, current):
            parent[name] = operand
    elif operator in ("$push", "$addToSet"):
        parent[name] = _appended(operator, current, operand)


def _parent(document: dict[str, Any], parts: list[str], *, create: bool) -> dict[str, Any] | None:
    """The document holding the last field of `parts`, each one on the way copied (and created
    when `create`); None when it does not exist and is not to be created."""
    parent = document
    for part in parts[:-1]:
        child = parent.get(part, _MISSING)
        if child is _MISSING:
            if not create:
                return None
            child = {}
        elif not isinstance(child, dict):
            raise Unsupported(f"a field inside a {type(child).__name__}")
        else:
            child = dict(child)
        parent[part] = child
        parent = child
    return parent


def _appended(operator: str, current: Any, operand: Any) -> list[Any]:
    if current is _MISSING:
        current = []
    if not isinstance(current, list):
        raise Unsupported(f"{operator} onto a {type(current).__name__}")
    each, options = [operand], {}
    if isinstance(operand, Mapping) and "$each" in operand:
        each = list(operand["$each"])
        options = {key: value for key, value in operand.items() if key != "$each"}
    if set(options) - ({"$slice"} if operator == "$push" else set()):
        raise Unsupported(f"{operator} with {sorted(options)}")
    result = list(current)
    if operator == "$addToSet":
        held = [normal(item) for item in result]
        for item in each:
            if normal(item) not in held:
                result.append(item)
                held.append(normal(item))
        return result
    result.extend(each)
    if "$slice" in options:
        limit = int(options["$slice"])
        result = result[limit:] if limit < 0 else result[:limit]
    return result
