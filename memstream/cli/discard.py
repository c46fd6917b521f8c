"""`memstream discard SHADOW --yes`: drop a shadow made by `memstream reextract` — its read
model's database and its topics (results and table changelogs). Never the live read model or
topics, nor a database without a shadow's mark (`memstream.runtime.shadow.mark_shadow`), nor the
shadow served or the one `memstream promote --back` would serve again. Its
consumer groups hold only offsets and are left for the broker to expire
(`offsets.retention.minutes`, 7 days by default; aiokafka cannot delete a group): until then
`memstream reextract` refuses the name, which would resume where the discarded shadow stopped.
Without `--yes` it only says what it would drop."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from memstream.cli.settings import live_and_shadow


def register(commands: Any) -> None:
    """Add `discard` to the `memstream` parser's subcommands."""
    discard = commands.add_parser("discard", help="drop a shadow made by `memstream reextract`")
    discard.add_argument("shadow", help="the shadow's name (its database)")
    discard.add_argument("--yes", action="store_true", help="drop it (otherwise: only say what)")
    discard.set_defaults(run=_discard)


def _discard(args: argparse.Namespace) -> int:
    from pymongo import MongoClient

    from memstream.extractors import DEFAULT_EXTRACTOR
    from memstream.promotion.switches import synced
    from memstream.runtime.pipeline import configured
    from memstream.runtime.shadow import delete_topics, shadow_extractor, shadow_topics

    live, environment = live_and_shadow(args.shadow, DEFAULT_EXTRACTOR)
    kafka = configured(live, environment).kafka
    if shadow_extractor(live, args.shadow) is None:
        raise SystemExit(
            f"memstream: the database {args.shadow!r} is not a shadow made by `memstream "
            "reextract` (it has no shadow mark): nothing dropped"
        )
    served = asyncio.run(synced(live))
    if args.shadow in (served.shadow, served.replaced_shadow):
        role = "is served" if args.shadow == served.shadow else "is what `promote --back` serves"
        raise SystemExit(
            f"memstream: the shadow {args.shadow!r} {role} (`memstream promote`): nothing dropped"
        )
    topics = asyncio.run(shadow_topics(kafka, kafka.group_prefix))
    client: MongoClient[dict[str, Any]] = MongoClient(live.mongodb.uri, tz_aware=True)
    try:
        database = args.shadow in client.list_database_names()
        print(f"database: {args.shadow if database else '(none)'}")
        print(f"topics: {', '.join(topics) or '(none)'}")
        print(f"consumer groups: {kafka.group_prefix}… (left for the broker to expire)")
        if not args.yes:
            print("nothing dropped: run it again with --yes")
            return 1
        asyncio.run(delete_topics(kafka, topics))
        if database:
            client.drop_database(args.shadow)
    finally:
        client.close()
    print(f"shadow {args.shadow} discarded")
    return 0
