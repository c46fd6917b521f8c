"""JSON Schemas of the events, for producers and consumers in other languages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from events.codec import EVENT_TYPES


def json_schemas() -> dict[str, dict[str, Any]]:
    """`{event_type: JSON Schema}` for every event type."""
    schemas: dict[str, dict[str, Any]] = {}
    for model in EVENT_TYPES:
        schema = model.model_json_schema(mode="validation")
        schema["$id"] = f"https://memstream.dev/schemas/{model.__name__}.json"
        schemas[model.__name__] = schema
    return schemas


def export_schemas(directory: Path) -> list[Path]:
    """Write `<EventType>.schema.json` files into `directory`; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in json_schemas().items():
        path = directory / f"{name}.schema.json"
        path.write_bytes(orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        written.append(path)
    return written
