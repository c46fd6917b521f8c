"""`memstream dlq list|show|redrive`: the operator's view of dead letters, and their redrive.

An **operator API**: it reads and redrives every user's poison records (the `dead_letters` read
model), unlike the SDK, which never crosses users. The rules (which letters may be redriven,
ids, headers) are `handlers.dead_letters`; this module reads MongoDB, prints with rich, and
sends through Kafka. Record format and redrive semantics: docs/architecture.md, "Dead letters".

A redrive re-sends the original record (`payload`, or the record read back from the log when
the payload kept was cut) to its source topic and partition with three headers naming the
redrive, the letter and the stage that dead-lettered it; then appends `DeadLetterRedriven` to
the dead-letters topic, which the projector notes on the letter.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from events.codec import encode
from events.dead_letters import DeadLetterRedriven
from handlers.dead_letters import (
    Letter,
    PayloadIncomplete,
    Redrive,
    choose,
    counts_by_reason,
    matches_original,
    original_value,
    redrive_id,
)
from memstream.cli.settings import as_served
from memstream.config import Settings, load_settings

if TYPE_CHECKING:  # the clients are imported where used: building the CLI's parser stays light
    from aiokafka import AIOKafkaProducer
    from pymongo import MongoClient
    from pymongo.database import Database

    Db = Database[dict[str, Any]]
OPERATOR_NOTE = (
    "Operator API: dead letters span every user (the SDK never does); "
    "see docs/architecture.md, 'Dead letters'."
)


def register(commands: Any) -> None:
    """Add `dlq` to the `memstream` parser's subcommands."""
    dlq = commands.add_parser(
        "dlq", help="dead letters: list, show, redrive (operator API, spans users)"
    )
    dlq.description = OPERATOR_NOTE
    actions = dlq.add_subparsers(required=True, metavar="action")

    listing = actions.add_parser("list", help="dead letters, newest first, with counts by reason")
    listing.description = OPERATOR_NOTE
    listing.add_argument("--stage", help="only this stage's (window, extract-semantic, …)")
    listing.add_argument("--since", type=_time, help="dead-lettered at/after this ISO time")
    listing.add_argument("--limit", type=int, default=50, help="at most this many rows")
    listing.set_defaults(run=_list)

    show = actions.add_parser("show", help="one dead letter: reason, source, key, payload")
    show.description = OPERATOR_NOTE
    show.add_argument("id", help="the dead letter's id (a unique prefix will do)")
    show.set_defaults(run=_show)

    redrive = actions.add_parser(
        "redrive", help="re-send dead letters to their source topic (after a fix)"
    )
    redrive.description = OPERATOR_NOTE
    which = redrive.add_mutually_exclusive_group(required=True)
    which.add_argument("id", nargs="?", help="the dead letter's id (a unique prefix will do)")
    which.add_argument("--all", action="store_true", help="every letter not redriven yet")
    redrive.add_argument("--stage", help="with --all: only this stage's letters")
    redrive.add_argument("--dry-run", action="store_true", help="say what would be sent")
    redrive.add_argument(
        "--force", action="store_true", help="redrive letters already redriven (or failed again)"
    )
    redrive.set_defaults(run=_redrive)


# --- reading -----------------------------------------------------------------------------------


def letters(
    db: Db, *, stage: str | None = None, since: datetime | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    """Dead letters, newest first (`stage`, `since` filter; `limit` rows at most)."""
    from pymongo import DESCENDING

    from projections.store import DEAD_LETTERS

    query: dict[str, Any] = {"stage": {"$exists": True}}
    if stage:
        query["stage"] = stage
    if since:
        query["dead_lettered_at"] = {"$gte": since}
    cursor = db[DEAD_LETTERS].find(query).sort("dead_lettered_at", DESCENDING)
    return list(cursor.limit(limit) if limit > 0 else cursor)


class UnknownLetter(LookupError):
    """No dead letter (or more than one) answers to the id given."""


def letter(db: Db, wanted: str) -> dict[str, Any]:
    """The dead letter `wanted` names: its id, or a prefix of exactly one id."""
    from projections.store import DEAD_LETTERS

    found = db[DEAD_LETTERS].find_one({"_id": wanted})
    if found is not None:
        return found
    ids = [d["_id"] for d in db[DEAD_LETTERS].find({}, {"_id": 1}) if d["_id"].startswith(wanted)]
    if len(ids) != 1:
        raise UnknownLetter(
            f"no dead letter {wanted!r}" if not ids else f"{wanted!r} names {len(ids)} letters"
        )
    return db[DEAD_LETTERS].find_one({"_id": ids[0]}) or {}


# --- redriving ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What happened to one letter asked for."""

    letter_id: str
    action: str  # "sent", "would send", "skipped", "failed"
    detail: str


def redrive(
    settings: Settings,
    db: Db,
    *,
    wanted: str | None = None,
    every: bool = False,
    stage: str | None = None,
    dry_run: bool = False,
    force: bool = False,
    now: datetime | None = None,
) -> list[Outcome]:
    """Redrive the letter `wanted`, or with `every` all letters (of `stage`) that
    `handlers.dead_letters.choose` allows; return one `Outcome` per letter considered."""
    documents = [letter(db, wanted)] if wanted else letters(db, stage=stage, limit=0)
    by_id = {document["_id"]: document for document in documents}
    choice = choose((Letter.of(d) for d in documents), every=every, force=force)
    outcomes = [Outcome(s.letter_id, "skipped", why) for s, why in choice.skipped]
    if not choice.chosen:
        return outcomes
    return outcomes + asyncio.run(
        _send_all(settings, [by_id[c.letter_id] for c in choice.chosen], dry_run, force, now)
    )


async def _send_all(
    settings: Settings,
    documents: Sequence[dict[str, Any]],
    dry_run: bool,
    force: bool,
    now: datetime | None,
) -> list[Outcome]:
    from aiokafka import AIOKafkaProducer

    servers = settings.kafka.bootstrap_servers
    if not servers:
        raise ValueError("KAFKA_BOOTSTRAP_SERVERS is not set (is `memstream up` running?)")
    producer = AIOKafkaProducer(**settings.kafka.client_options(), acks="all")
    await producer.start()
    try:
        outcomes = []
        for document in documents:
            try:
                outcomes.append(await _send_one(settings, producer, document, dry_run, force, now))
            except PayloadIncomplete as exc:
                outcomes.append(Outcome(document["_id"], "failed", str(exc)))
        return outcomes
    finally:
        await producer.stop()


async def _send_one(
    settings: Settings,
    producer: AIOKafkaProducer,
    document: dict[str, Any],
    dry_run: bool,
    force: bool,
    now: datetime | None,
) -> Outcome:
    entry = Letter.of(document)
    topic, partition = str(entry.source_topic), int(entry.source_partition or 0)
    value = await _original(settings, document)
    key = document["record_key"].encode() if document.get("record_key") is not None else None
    redrive = Redrive(redrive_id(entry.letter_id, entry.redrives), entry.letter_id, entry.stage)
    where = f"{topic}[{partition}] for {entry.stage} ({len(value)} bytes)"
    if dry_run:
        return Outcome(entry.letter_id, "would send", f"{where}, redrive {redrive.redrive_id}")
    # The record first, then the note: a crash in between leaves the letter un-noted, and the
    # next redrive computes the same redrive id, which the stage applies once.
    sent = await producer.send_and_wait(
        topic, value, key=key, partition=partition, headers=redrive.headers()
    )
    note = DeadLetterRedriven(
        event_id=redrive.redrive_id,
        occurred_at=now or datetime.now(UTC),
        dead_letter_id=entry.letter_id,
        stage=entry.stage,
        target_topic=topic,
        target_partition=partition,
        target_offset=sent.offset,
        forced=force and entry.redrives > 0,
    )
    await producer.send_and_wait(
        settings.kafka.topics.dead_letters, encode(note), key=note.key.encode()
    )
    return Outcome(entry.letter_id, "sent", f"{where} at offset {sent.offset}")


async def _original(settings: Settings, document: dict[str, Any]) -> bytes:
    """The letter's original value: its payload when whole, else read back from the log."""
    try:
        return original_value(document)
    except PayloadIncomplete:
        offset = document.get("source_offset")
        if offset is None:
            raise
        value = await _read_back(
            settings, document["source_topic"], document["source_partition"], offset
        )
        if not matches_original(document, value):
            raise PayloadIncomplete(
                f"dead letter {document['_id']}: its payload was cut and the log no longer "
                f"holds the original at {document['source_topic']}[{document['source_partition']}]"
                f"@{offset}"
            ) from None
        return value or b""


async def _read_back(settings: Settings, topic: str, partition: int, offset: int) -> bytes | None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    reader = AIOKafkaConsumer(**settings.kafka.client_options(), enable_auto_commit=False)
    await reader.start()
    try:
        tp = TopicPartition(topic, partition)
        reader.assign([tp])
        reader.seek(tp, offset)
        batches = await reader.getmany(tp, timeout_ms=5_000, max_records=1)
        for record in batches.get(tp, []):
            if record.offset == offset:
                value: bytes | None = record.value
                return value
        return None
    finally:
        await reader.stop()


# --- the commands ------------------------------------------------------------------------------


def _database(settings: Settings) -> tuple[MongoClient[dict[str, Any]], Db]:
    from pymongo import MongoClient

    if not settings.mongodb.uri:
        raise ValueError("MONGODB_URI is not set (is `memstream up` running?)")
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongodb.uri, tz_aware=True)
    return client, client[settings.mongodb.database]


def _list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    client, db = _database(as_served(load_settings()))
    try:
        found = letters(db, stage=args.stage, since=args.since, limit=args.limit)
    finally:
        client.close()
    console = Console(width=max(Console().width, 140))
    table = Table(title=f"dead letters ({len(found)} shown)")
    table.add_column("id", no_wrap=True, min_width=36)
    for column in ("stage", "dead-lettered at", "source", "key", "reason", "redriven"):
        table.add_column(column, overflow="fold")
    for document in found:
        table.add_row(
            document["_id"],
            document["stage"],
            f"{document['dead_lettered_at']:%Y-%m-%d %H:%M:%S}",
            _source(document),
            str(document.get("record_key")),
            str(document["reason"])[:120],
            _redriven(document),
        )
    console.print(table)
    counts = Table(title="by stage and reason")
    for column in ("count", "stage", "reason"):
        counts.add_column(column)
    for (stage, reason), count in counts_by_reason(found).items():
        counts.add_row(str(count), stage, reason)
    console.print(counts)
    return 0


def _show(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    client, db = _database(as_served(load_settings()))
    try:
        document = letter(db, args.id)
    except UnknownLetter as exc:
        print(f"memstream: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    console = Console()
    console.print(f"dead letter {document['_id']}", style="bold", markup=False)
    table = Table(show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for field in (
        "stage",
        "reason",
        "dead_lettered_at",
        "source_topic",
        "source_partition",
        "source_offset",
        "record_key",
        "payload_bytes",
        "payload_sha256",
        "redrive_of",
        "redrive_id",
    ):
        table.add_row(field, str(document.get(field)))
    table.add_row("redrives", _redriven(document))
    console.print(table)
    console.print("payload:", style="bold")
    console.print(str(document.get("payload", "")), markup=False, highlight=False)
    return 0


def _redrive(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    if args.stage and not args.all:
        print("memstream: --stage goes with --all", file=sys.stderr)
        return 2
    settings = as_served(load_settings())
    client, db = _database(settings)
    try:
        outcomes = redrive(
            settings,
            db,
            wanted=args.id,
            every=args.all,
            stage=args.stage,
            dry_run=args.dry_run,
            force=args.force,
        )
    except UnknownLetter as exc:
        print(f"memstream: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    table = Table(title="redrive" + (" (dry run)" if args.dry_run else ""))
    table.add_column("id", no_wrap=True, min_width=36)
    for column in ("action", "detail"):
        table.add_column(column, overflow="fold")
    for outcome in outcomes:
        table.add_row(outcome.letter_id, outcome.action, outcome.detail)
    Console(width=max(Console().width, 140)).print(table)
    asked_for_one = args.id is not None
    return (
        1
        if any(o.action == "failed" for o in outcomes)
        or (asked_for_one and not any(o.action in ("sent", "would send") for o in outcomes))
        else 0
    )


def _source(document: dict[str, Any]) -> str:
    topic = document.get("source_topic")
    if topic is None:
        return "-"
    return f"{topic}[{document.get('source_partition')}]@{document.get('source_offset')}"


def _redriven(document: dict[str, Any]) -> str:
    redrives = document.get("redrives") or []
    if not redrives:
        return "no"
    last = redrives[-1]
    return f"{len(redrives)}x, last {last.get('occurred_at'):%Y-%m-%d %H:%M:%S}"


def _time(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r}: give a timezone, e.g. {text}Z")
    return moment
