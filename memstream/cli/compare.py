"""`memstream compare LIVE SHADOW [--users U …] [--json]`: what two read models of one log
remember differently (`handlers.comparison`): per user and memory type, the memories alike,
changed (the same snapshot read two ways), only on one side, the updates, reinforcements and
duplicates of each, and what each side's extraction cost per snapshot. Exit status 0 when they
remember alike, 1 when they differ."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from memstream.cli.settings import settings_with_a_database


def register(commands: Any) -> None:
    """Add `compare` to the `memstream` parser's subcommands."""
    compare = commands.add_parser(
        "compare", help="what two read models (live, a shadow) remember differently"
    )
    compare.add_argument("live", help="a read model's database (the live one: `memstream`)")
    compare.add_argument("shadow", help="another one (a shadow made by `memstream reextract`)")
    compare.add_argument("--users", nargs="+", default=(), metavar="USER", help="only these")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    compare.set_defaults(run=_compare)


def _compare(args: argparse.Namespace) -> int:
    from pymongo import MongoClient

    from handlers.comparison import compare, summary_lines
    from projections.comparison import side_of

    settings = settings_with_a_database()
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongodb.uri, tz_aware=True)
    try:
        names = set(client.list_database_names())
        missing = [name for name in (args.live, args.shadow) if name not in names]
        if missing:
            raise SystemExit(f"memstream: no database {', '.join(map(repr, missing))}")
        live = side_of(client[args.live], args.users)
        shadow = side_of(client[args.shadow], args.users)
    finally:
        client.close()
    comparison = compare(live, shadow, args.users)
    if args.json:
        print(json.dumps(asdict(comparison), indent=2, ensure_ascii=False))
    else:
        for line in summary_lines(comparison):
            print(line)
    return 1 if any(d.differs for d in comparison.differences) else 0
