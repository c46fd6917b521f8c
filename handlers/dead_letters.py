"""Dead letters and their redrive: ids, the redrive headers, and which letters an operator may
redrive (docs/architecture.md, "Dead letters").

Pure: no broker, no database. `memstream.cli.dlq` reads the `dead_letters` read model, asks
`choose` which letters to redrive, and sends what `redrive_plan` says; the stages ask
`redrive_of` and `applies_to` about every record they read.

The dead-letter API is an *operator* API: it lists and redrives every user's poison records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from events.memories import derived_id

REDRIVE_HEADER = "memstream-redrive-id"
"""Kafka header of a re-sent record: the redrive's id (`DeadLetterRedriven.event_id`)."""
REDRIVE_OF_HEADER = "memstream-redrive-of"
"""Kafka header of a re-sent record: the id of the dead letter it redrives."""
REDRIVE_STAGE_HEADER = "memstream-redrive-stage"
"""Kafka header of a re-sent record: the one stage that applies it (the stage that
dead-lettered it); every other deciding stage passes over it, since it handled the original."""

Headers = Sequence[tuple[str, bytes]]


@dataclass(frozen=True)
class Redrive:
    """What the headers of a re-sent record say about its redrive."""

    redrive_id: str
    dead_letter_id: str
    stage: str

    def headers(self) -> list[tuple[str, bytes]]:
        return [
            (REDRIVE_HEADER, self.redrive_id.encode()),
            (REDRIVE_OF_HEADER, self.dead_letter_id.encode()),
            (REDRIVE_STAGE_HEADER, self.stage.encode()),
        ]


def redrive_of(headers: Iterable[tuple[str, bytes | None]] | None) -> Redrive | None:
    """The redrive a record's headers describe; None for an ordinary record (or headers that
    do not name all three parts)."""
    found: dict[str, str] = {}
    for name, value in headers or ():
        if name in (REDRIVE_HEADER, REDRIVE_OF_HEADER, REDRIVE_STAGE_HEADER) and value:
            found[name] = value.decode(errors="replace")
    if len(found) < 3:
        return None
    return Redrive(found[REDRIVE_HEADER], found[REDRIVE_OF_HEADER], found[REDRIVE_STAGE_HEADER])


def applies_to(redrive: Redrive | None, stage: str) -> bool:
    """Whether `stage` applies a record: every ordinary record; a redriven one only in the stage
    that dead-lettered it (the projector projects every record, idempotently, regardless)."""
    return redrive is None or redrive.stage == stage


def content_hash(key: bytes | None, value: bytes | None) -> str:
    """The hash of a record's key and value that its dead letter's id derives from."""
    return hashlib.sha256((key or b"") + b"\x00" + (value or b"")).hexdigest()


def dead_letter_id(
    stage: str, topic: str, key: bytes | None, value: bytes | None, redrive: Redrive | None
) -> str:
    """A dead letter's id: the stage, the topic and the record's content — never its position
    (positions repeat when the embedded log restarts) — and, for a redriven record, the redrive:
    the same poison re-read after a crash is the same letter, a redrive that fails again is a
    new one (pointing at the letter it redrove)."""
    parts: list[str] = ["dead-letter", stage, topic, content_hash(key, value)]
    if redrive is not None:
        parts.append(redrive.redrive_id)
    return derived_id(*parts)


def redrive_id(dead_letter_id: str, earlier_redrives: int) -> str:
    """The id of a dead letter's next redrive: from the letter and how many redrives it had.

    Two operators redriving the same letter at once compute the same id, so the stage applies it
    once; `--force` on a redriven letter gets the next id."""
    return derived_id("redrive", dead_letter_id, earlier_redrives)


@dataclass(frozen=True)
class Letter:
    """The parts of a `dead_letters` document the redrive rules read."""

    letter_id: str
    stage: str
    source_topic: str | None
    source_partition: int | None
    redrives: int
    redrive_of: str | None

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> Letter:
        return cls(
            letter_id=str(document["_id"]),
            stage=str(document["stage"]),
            source_topic=document.get("source_topic"),
            source_partition=document.get("source_partition"),
            redrives=len(document.get("redrives") or ()),
            redrive_of=document.get("redrive_of"),
        )


@dataclass(frozen=True)
class Choice:
    """Which letters to redrive, and why each other one is not."""

    chosen: tuple[Letter, ...]
    skipped: tuple[tuple[Letter, str], ...]


def choose(letters: Iterable[Letter], *, every: bool, force: bool) -> Choice:
    """The letters to redrive among `letters` (already filtered by id or stage).

    A letter already redriven is skipped unless `force` (its redrive went back to the stage once;
    a second would apply it twice). With `every` (`--all`), a letter that is itself a redrive
    which failed again is skipped unless `force`: a scheduled `redrive --all` must not send
    still-poison input round forever; redrive it by id once the cause is fixed. A letter without
    a source position (written before positions were kept) cannot be redriven at all.
    """
    chosen: list[Letter] = []
    skipped: list[tuple[Letter, str]] = []
    for letter in letters:
        if letter.source_topic is None or letter.source_partition is None:
            skipped.append((letter, "no source topic and partition to send it back to"))
        elif letter.redrives and not force:
            skipped.append((letter, f"already redriven {letter.redrives}x (use --force)"))
        elif every and letter.redrive_of is not None and not force:
            skipped.append(
                (letter, f"a failed redrive of {letter.redrive_of} (redrive it by id, or --force)")
            )
        else:
            chosen.append(letter)
    return Choice(tuple(chosen), tuple(skipped))


class PayloadIncomplete(ValueError):
    """A dead letter's `payload` is not the whole original record."""


def original_value(document: Mapping[str, Any]) -> bytes:
    """The original record's value from a dead letter's `payload`, or `PayloadIncomplete` when
    the payload was cut or was not UTF-8 (then the record must be read back from the log at
    its source position). Letters written before `payload_sha256` existed are taken on trust."""
    value = str(document.get("payload") or "").encode()
    expected = document.get("payload_sha256")
    if expected is not None and hashlib.sha256(value).hexdigest() != expected:
        raise PayloadIncomplete(
            f"dead letter {document['_id']}: the payload kept is not the original "
            f"{document.get('payload_bytes')} bytes (cut, or not UTF-8)"
        )
    return value


def matches_original(document: Mapping[str, Any], value: bytes | None) -> bool:
    """Whether `value` (read back from the log) is the record the letter describes."""
    expected = document.get("payload_sha256")
    return expected is not None and hashlib.sha256(value or b"").hexdigest() == expected


def counts_by_reason(documents: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """How many letters per (stage, reason head): the reason up to its first colon."""
    counts: dict[tuple[str, str], int] = {}
    for document in documents:
        head = reason_head(str(document.get("reason", "")))
        key = (str(document.get("stage", "")), head)
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def reason_head(reason: str) -> str:
    """A reason's kind, for grouping: the text before its first colon, at most 80 characters."""
    return reason.split(":")[0].strip()[:80]
