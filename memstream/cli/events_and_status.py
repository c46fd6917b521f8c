"""The CLI's commands for consumers and operators: `events` and `status`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import datetime
from typing import Any

from memstream.cli.settings import as_served
from memstream.config import load_settings


def register(commands: Any) -> None:
    """Add the read-side commands to the `memstream` parser's subcommands."""
    events = commands.add_parser("events", help="a user's memory events from the log")
    events.add_argument("--user", required=True, help="the user whose events to read")
    events.add_argument(
        "--since", help="a memories-topic offset, or an ISO time the records were appended at/after"
    )
    events.add_argument("--follow", action="store_true", help="keep waiting for new events")
    events.add_argument("--json", action="store_true", help="one JSON object per line")
    events.set_defaults(run=_events)

    query = commands.add_parser("query", help="a named analyst query on the read model")
    query.add_argument("name", nargs="?", help="the query (without a name: list them)")
    query.add_argument("--user", help="only this user's data")
    query.add_argument("--memory", help="the memory id (lineage)")
    query.add_argument("--since", type=_time, help="from this ISO time (inclusive)")
    query.add_argument("--until", type=_time, help="until this ISO time (exclusive)")
    query.add_argument("--limit", type=int, default=20)
    output = query.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="one JSON object per row")
    output.add_argument("--csv", action="store_true", help="comma-separated, with a header")
    output.add_argument("--explain", action="store_true", help="print the mongosh command only")
    query.set_defaults(run=_query)

    rebuild = commands.add_parser("replay", help="rebuild the read model into a fresh database")
    rebuild.add_argument("--into", required=True, help="the (empty) database to build")
    source = rebuild.add_mutually_exclusive_group()
    source.add_argument("--from-offset", type=int, help="start at this offset of every partition")
    source.add_argument(
        "--from-time", type=_time, help="start at records appended at/after this time"
    )
    source.add_argument(
        "--from-collections",
        action="store_true",
        help="rebuild from the configured database's collections (the broker lost the log)",
    )
    rebuild.set_defaults(run=_replay)

    verify = commands.add_parser("verify", help="compare the read model with another database")
    verify.add_argument("--against", required=True, help="the other database (same server)")
    verify.set_defaults(run=_verify)

    status = commands.add_parser("status", help="is the pipeline healthy, how far behind is it")
    status.add_argument("--json", action="store_true", help="the report as one JSON object")
    status.set_defaults(run=_status)


def _time(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r}: give a timezone, e.g. {text}Z")
    return moment


def since_value(text: str | None) -> int | datetime | None:
    """`--since`: an offset (digits) or an ISO time with a timezone."""
    if text is None:
        return None
    if text.isdigit():
        return int(text)
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"--since {text!r}: give a timezone, e.g. {text}Z")
    return moment


def _events(args: argparse.Namespace) -> int:
    from memstream.sdk.client import MemoryClient

    settings = load_settings()
    since = since_value(args.since)
    if not settings.mongodb.uri:
        print(
            "memstream: MONGODB_URI is not set (the feed reads the erasure receipts to skip "
            "forgotten memories; is `memstream up` running?)",
            file=sys.stderr,
        )
        return 2
    client = MemoryClient(settings)  # reads only: the producer is never started

    async def show() -> None:
        async for event in client.events(args.user, since=since, follow=args.follow):
            if args.json:
                print(event.model_dump_json(), flush=True)
            else:
                print(
                    f"{event.occurred_at:%Y-%m-%d %H:%M:%S} {event.event_type:16} "
                    f"{event.memory_type:10} {event.memory_id} v{event.version}",
                    flush=True,
                )

    async def shown() -> None:
        try:
            await show()
        finally:
            await client.close()

    try:
        asyncio.run(shown())
    except KeyboardInterrupt:
        return 0
    return 0


def _status(args: argparse.Namespace) -> int:
    from memstream.runtime.status import EXIT_CODES, format_status, status

    report = status(load_settings())
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(format_status(report))
    sys.stdout.flush()
    return EXIT_CODES[report["health"]]


def _query(args: argparse.Namespace) -> int:
    from pymongo import MongoClient

    from memstream.cli.queries import QUERIES, Parameters, explain, rows

    if args.name is None or args.name not in QUERIES:
        if args.name is not None:
            print(f"memstream: no query {args.name!r}", file=sys.stderr)
        for name, known in QUERIES.items():
            print(f"{name:16} {known.description}")
        return 0 if args.name is None else 2
    settings = as_served(load_settings())
    parameters = Parameters(
        user=args.user,
        memory_id=args.memory,
        since=args.since,
        until=args.until,
        limit=args.limit,
        types=tuple(settings.memory.extraction.enabled),
    )
    if args.explain:
        print(explain(args.name, parameters))
        return 0
    if not settings.mongodb.uri:
        print("memstream: MONGODB_URI is not set (is `memstream up` running?)", file=sys.stderr)
        return 2
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongodb.uri, tz_aware=True)
    try:
        found = rows(client[settings.mongodb.database], args.name, parameters)
    finally:
        client.close()
    _print_rows(found, as_json=args.json, as_csv=args.csv)
    return 0


def _print_rows(found: list[dict[str, Any]], *, as_json: bool, as_csv: bool) -> None:
    if as_json:
        for row in found:
            print(json.dumps(row, default=str))
        return
    columns = list(dict.fromkeys(key for row in found for key in row))
    if as_csv:
        import csv

        writer = csv.DictWriter(sys.stdout, fieldnames=columns)
        writer.writeheader()
        writer.writerows(found)
        return
    print("  ".join(columns))
    for row in found:
        print("  ".join(str(row.get(column, "")) for column in columns))


def _replay(args: argparse.Namespace) -> int:
    from pymongo import MongoClient

    from handlers.key_ring import StoreKeyRing
    from memstream.cli.replay import (
        IncompleteReadModel,
        NotEmpty,
        collection_events,
        kafka_events,
        replay,
    )
    from memstream.keystore.sealing import data_key_store
    from streams.settings import utc_now

    settings = as_served(load_settings())
    if not settings.mongodb.uri:
        print("memstream: MONGODB_URI is not set (is `memstream up` running?)", file=sys.stderr)
        return 2
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongodb.uri, tz_aware=True)
    try:
        if args.from_collections:
            source = client[settings.mongodb.database]
            try:
                events = list(collection_events(source))
            except IncompleteReadModel as exc:
                print(f"memstream: {exc}", file=sys.stderr)
                return 1
        else:
            keys = StoreKeyRing(
                data_key_store(client[settings.mongodb.keys_database_name], settings, utc_now)
            )
            events = kafka_events(
                settings.kafka,
                from_offset=args.from_offset,
                from_time=args.from_time,
                keys=keys,
            )
        try:
            report = replay(iter(events), client[args.into], total=len(events))
        except NotEmpty as exc:
            print(f"memstream: {exc}", file=sys.stderr)
            return 2
    finally:
        client.close()
    rate = report.events / report.seconds if report.seconds else 0.0
    print(
        f"replayed {report.events} events into {args.into}: {report.writes} writes in "
        f"{report.seconds:.1f}s ({rate:.0f} events/s)"
    )
    for collision in report.collisions:
        print(f"collision: {collision}", file=sys.stderr)
    return 1 if report.collisions else 0


def _verify(args: argparse.Namespace) -> int:
    from pymongo import MongoClient

    from memstream.cli.replay import differences

    settings = as_served(load_settings())
    if not settings.mongodb.uri:
        print("memstream: MONGODB_URI is not set (is `memstream up` running?)", file=sys.stderr)
        return 2
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongodb.uri, tz_aware=True)
    try:
        found = differences(client[settings.mongodb.database], client[args.against])
    finally:
        client.close()
    for line in found:
        print(line)
    print(f"{len(found)} differences" if found else "no differences")
    return 1 if found else 0
