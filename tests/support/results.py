"""Checking a real result against the type the SDK declares for it, and a read model in
memory whose documents the projections write (through `projections.writes.Writes`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from memstream.sdk.results import Document
from projections.documents import apply_change, matches


def assert_conforms(document: Mapping[str, Any], kind: Any) -> None:
    """`document` has every key `kind` (a TypedDict) requires and none it does not declare."""
    keys = set(document)
    required: frozenset[str] = kind.__required_keys__
    declared = required | kind.__optional_keys__
    assert required <= keys, f"{kind.__name__} lacks {sorted(required - keys)}"
    assert keys <= declared, f"{kind.__name__} has undeclared {sorted(keys - declared)}"


class ReadModelInMemory:
    """A `Writes` keeping each collection's documents in a dict by `_id`, with MongoDB's
    semantics for the conditions and changes `projections.documents` evaluates (an upsert
    starts from the selector's `_id`)."""

    def __init__(self) -> None:
        self.collections: defaultdict[str, dict[Any, Document]] = defaultdict(dict)

    def documents(self, collection: str) -> list[Document]:
        return list(self.collections[collection].values())

    def insert_once(
        self, collection: str, doc_id: str, document: dict[str, Any], fingerprint: str
    ) -> None:
        self.collections[collection].setdefault(
            doc_id, {"_id": doc_id, **document, "fingerprint": fingerprint}
        )

    def update(
        self,
        collection: str,
        selector: dict[str, Any],
        change: dict[str, Any],
        *,
        upsert: bool = False,
        many: bool = False,
        collision: str | None = None,
    ) -> None:
        found = self._matching(collection, selector)
        for document in found if many else found[:1]:
            _pull(document, change.get("$pull", {}))
            apply_change(document, _without_pull(change), inserting=False)
        if not found and upsert:
            created: Document = {"_id": selector["_id"]}
            apply_change(created, _without_pull(change), inserting=True)
            self.collections[collection][created["_id"]] = created

    def claim(
        self,
        collection: str,
        doc_id: str,
        slot: str,
        record: dict[str, Any],
        fingerprint: str,
        *,
        created: dict[str, Any] | None = None,
    ) -> bool:
        held = self.collections[collection]
        value = {**record, "fingerprint": fingerprint}
        if not slot:
            held.setdefault(doc_id, {"_id": doc_id, **(created or {}), **value})
            return bool(held[doc_id]["fingerprint"] == fingerprint)
        document = held.setdefault(doc_id, {"_id": doc_id, **(created or {})})
        apply_change(document, {"$set": {slot: value}}, inserting=False)
        return True

    def replace_failed(
        self,
        collection: str,
        doc_id: str,
        slot: str,
        record: dict[str, Any],
        fingerprint: str,
        *,
        created: dict[str, Any] | None = None,
    ) -> bool:
        return self.claim(collection, doc_id, slot, record, fingerprint, created=created)

    def link_turn(self, turn_id: str) -> None:
        for snapshot in self._matching("snapshots", {"turn_ids": turn_id}):
            self.update("turns", {"_id": turn_id}, {"$set": {"snapshot_id": snapshot["_id"]}})

    def delete(self, collection: str, selector: dict[str, Any]) -> int:
        found = self._matching(collection, selector)
        for document in found:
            del self.collections[collection][document["_id"]]
        return len(found)

    def ids(self, collection: str, selector: dict[str, Any], field: str = "_id") -> list[Any]:
        values: list[Any] = []
        for document in self._matching(collection, selector):
            value: Any = document
            for part in field.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if value is not None:
                values.append(value)
        return values

    def _matching(self, collection: str, selector: Mapping[str, Any]) -> list[Document]:
        return [d for d in self.collections[collection].values() if matches(d, selector)]


def _pull(document: Document, pulled: Mapping[str, Mapping[str, Any]]) -> None:
    """`$pull` of array elements (documents) matching a condition, on top-level fields."""
    for field, condition in pulled.items():
        document[field] = [e for e in document.get(field, []) if not matches(e, condition)]


def _without_pull(change: Mapping[str, Any]) -> dict[str, Any]:
    return {operator: fields for operator, fields in change.items() if operator != "$pull"}
