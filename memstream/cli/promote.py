"""`memstream promote SHADOW` and `memstream promote --back`: switch the read model the SDK, the
HTTP API and MCP serve (docs/architecture.md, "Promotion").

`promote SHADOW` serves a shadow made by `memstream reextract` in place of what is served now, and
from then on the live stages run its extractor into it; `--back` serves again what the last
switch replaced. Either writes one `ReadModelSwitched` to the serving topic and stores the fold
of that topic in the deployment's database; readers look it up there (within
`memstream.sdk.served.RECHECK_SECONDS`), and the live stages' workers restart into the served
lineage (`memstream.runtime.served`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from memstream.cli.settings import settings_with_a_database


def register(commands: Any) -> None:
    """Add `promote` to the `memstream` parser's subcommands."""
    promote = commands.add_parser(
        "promote", help="serve a shadow's read model (and run its extractor live), or go back"
    )
    promote.add_argument("shadow", nargs="?", help="the shadow's name (its database)")
    promote.add_argument(
        "--back", action="store_true", help="serve again what the last switch replaced"
    )
    promote.add_argument("--reason", default="", help="why (recorded with the switch)")
    promote.add_argument("--json", action="store_true", help="print the result as JSON")
    promote.set_defaults(run=_promote)


def _promote(args: argparse.Namespace) -> int:
    from handlers.serving import SwitchRefused, promotion, return_to_replaced
    from memstream.cli.forgetting import operator
    from memstream.promotion.lineage import ShadowRefused, shadow_environment
    from memstream.promotion.switches import record_switch, switches, synced
    from memstream.runtime.pipeline import prepare_topics
    from memstream.runtime.shadow import shadow_extractor
    from streams.settings import utc_now

    if bool(args.back) == bool(args.shadow):
        raise SystemExit("memstream: name a shadow to promote, or --back (not both)")
    live = settings_with_a_database()
    if not live.kafka.bootstrap_servers:
        raise SystemExit(
            "memstream: KAFKA_BOOTSTRAP_SERVERS is not set (is `memstream up` running?)"
        )
    prepare_topics(live)
    served = asyncio.run(synced(live))
    asked = {"requested_by": operator(), "reason": args.reason, "now": utc_now()}
    try:
        if args.back:
            switch = return_to_replaced(served, configured_extractor=live.extractor, **asked)
        else:
            extractor = shadow_extractor(live, args.shadow)
            if extractor is None:
                raise SystemExit(
                    f"memstream: the database {args.shadow!r} is not a shadow made by "
                    "`memstream reextract` (it has no shadow mark): nothing switched"
                )
            shadow_environment(live, args.shadow, extractor)  # still declared, a valid name
            switch = promotion(
                served, args.shadow, extractor, configured_extractor=live.extractor, **asked
            )
    except (SwitchRefused, ShadowRefused) as exc:
        raise SystemExit(f"memstream: {exc}") from None
    asyncio.run(record_switch(live.kafka, switch))
    now_served = asyncio.run(synced(live))
    if now_served.switch_id != switch.event_id:
        written = asyncio.run(switches(live.kafka))
        winner = next((s for s in written if s.event_id == now_served.switch_id), None)
        raise SystemExit(
            "memstream: another switch was written first "
            f"({winner.requested_by if winner else 'unknown'}, version {now_served.version}); "
            "nothing switched by this command"
        )
    result = {
        "version": switch.version,
        "served": switch.shadow or live.mongodb.database,
        "shadow": switch.shadow,
        "extractor": switch.extractor,
        "replaced": switch.replaced_shadow or live.mongodb.database,
        "replaced_extractor": switch.replaced_extractor,
        "back": switch.back,
        "switch_id": switch.event_id,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    database = live.mongodb.database
    print(
        f"serving: {_lineage(switch.shadow, database)}, extractor {switch.extractor} "
        f"(version {switch.version})"
    )
    print(
        f"replaced: {_lineage(switch.replaced_shadow, database)}, "
        f"extractor {switch.replaced_extractor}"
    )
    undo = "switch again with" if switch.back else "undo with"
    print(f"the live stages' workers restart into it; {undo} `memstream promote --back`")
    return 0


def _lineage(shadow: str | None, live_database: str) -> str:
    return f"the shadow {shadow}" if shadow else f"the live read model {live_database}"
