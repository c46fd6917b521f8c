"""The CLI's commands for consumers and operators: `events` and `status`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import datetime
from typing import Any

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

    status = commands.add_parser("status", help="is the pipeline healthy, how far behind is it")
    status.add_argument("--json", action="store_true", help="the report as one JSON object")
    status.set_defaults(run=_status)


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
    from memstream.event_feed import memory_events

    settings = load_settings()
    since = since_value(args.since)

    async def show() -> None:
        async for event in memory_events(
            settings.kafka, args.user, since=since, follow=args.follow
        ):
            if args.json:
                print(event.model_dump_json(), flush=True)
            else:
                print(
                    f"{event.occurred_at:%Y-%m-%d %H:%M:%S} {event.event_type:16} "
                    f"{event.memory_type:10} {event.memory_id} v{event.version}",
                    flush=True,
                )

    try:
        asyncio.run(show())
    except KeyboardInterrupt:
        return 0
    return 0


def _status(args: argparse.Namespace) -> int:
    from memstream.status import EXIT_CODES, format_status, status

    report = status(load_settings())
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(format_status(report))
    sys.stdout.flush()
    return EXIT_CODES[report["health"]]
