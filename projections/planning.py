"""The first step of projecting a batch (`projections.batch`): what each record's projection
would write if every claim it makes held.

Each record's projection (`projections.apply.apply_event`) is run against a recorder that says
yes to every claim and lists the writes it asks for (`Plan`): the ids the batch's decisions
depend on, fetched in one query per collection, and the writes replayed through
`projections.deciding.Decider`. A projection that deletes or reads is marked `erases`: it needs
the database as the log made it and is projected on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from events.codec import AnyEvent
from projections.apply import apply_event


@dataclass(frozen=True)
class PlannedWrite:
    """One write a projection asked for: the `Writes` method and its arguments."""

    method: str
    arguments: dict[str, Any]


@dataclass
class Plan:
    """The writes a record's projection asks for if every claim it makes holds."""

    writes: list[PlannedWrite] = field(default_factory=list)
    erases: bool = False
    error: Exception | None = None
    """What the projection raised after those writes (poison of its own, not a write's)."""


class _Erases(Exception):
    """The projection deletes or reads: it is projected on its own."""


class _Recorder:
    """A `Writes` that records what is asked of it; every claim holds."""

    def __init__(self) -> None:
        self.plan = Plan()

    def _record(self, method: str, **arguments: Any) -> None:
        self.plan.writes.append(PlannedWrite(method, arguments))

    def insert_once(
        self, collection: str, doc_id: str, document: dict[str, Any], fingerprint: str
    ) -> None:
        self._record(
            "insert_once",
            collection=collection,
            doc_id=doc_id,
            document=document,
            fingerprint=fingerprint,
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
        self._record(
            "update",
            collection=collection,
            selector=selector,
            change=change,
            upsert=upsert,
            many=many,
            collision=collision,
        )

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
        self._record(
            "claim",
            collection=collection,
            doc_id=doc_id,
            slot=slot,
            record=record,
            fingerprint=fingerprint,
            created=created,
        )
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
        self._record(
            "replace_failed",
            collection=collection,
            doc_id=doc_id,
            slot=slot,
            record=record,
            fingerprint=fingerprint,
            created=created,
        )
        return True

    def link_turn(self, turn_id: str) -> None:
        self._record("link_turn", turn_id=turn_id)

    def delete(self, collection: str, selector: dict[str, Any]) -> int:
        raise _Erases

    def ids(self, collection: str, selector: dict[str, Any], field: str = "_id") -> list[Any]:
        raise _Erases


def planned(event: AnyEvent, partition: int | None) -> Plan:
    """The writes `event`'s projection asks for if every claim it makes holds; `erases` when it
    deletes or reads (it is projected on its own), `error` what it raised after its writes."""
    recorder = _Recorder()
    try:
        apply_event(recorder, event, partition=partition)
    except _Erases:
        recorder.plan.erases = True
    except Exception as exc:  # the projection's own poison: raised after its earlier writes
        recorder.plan.error = exc
    return recorder.plan
